//! A tiled Cholesky factorisation, A = L·Lᵀ, with the typed API: three
//! codelets over NB×NB tiles, submitted in the order of the sequential
//! algorithm; the engine infers the DAG from what each task reads and
//! writes, and runs independent updates in parallel. Checked against the
//! same algorithm run on the whole matrix.
//!
//! `cargo run --example cholesky`

use tessera_engine::{Codelet, Config, Error, Read, ReadWrite, Runtime};

const NT: usize = 4; // tiles per side
const NB: usize = 32; // a tile's order
const N: usize = NT * NB;

/// An NB×NB tile, row-major.
type Tile = Vec<f64>;

/// Entry (i, j): symmetric and diagonally dominant, hence positive definite.
fn entry(i: usize, j: usize) -> f64 {
    1.0 / (1.0 + i.abs_diff(j) as f64) + if i == j { N as f64 } else { 0.0 }
}

/// In place, the lower Cholesky factor of the n×n matrix `a`.
fn potrf(a: &mut [f64], n: usize) {
    for j in 0..n {
        a[j * n + j] = (a[j * n + j] - (0..j).map(|k| a[j * n + k].powi(2)).sum::<f64>()).sqrt();
        for i in j + 1..n {
            let s: f64 = (0..j).map(|k| a[i * n + k] * a[j * n + k]).sum();
            a[i * n + j] = (a[i * n + j] - s) / a[j * n + j];
        }
    }
}

/// Every (i, j) of a tile, row by row.
fn cells() -> impl Iterator<Item = (usize, usize)> {
    (0..NB).flat_map(|i| (0..NB).map(move |j| (i, j)))
}

fn main() -> Result<(), Error> {
    // Names of their own: a simulated platform matches rates by name.
    let potrf_t = Codelet::<ReadWrite<Tile>>::new("chol-potrf").cpu(|_, _, a| {
        potrf(a, NB);
        Ok(())
    });
    // b := b·l⁻ᵀ, a tile below the diagonal.
    let trsm_t = Codelet::<(Read<Tile>, ReadWrite<Tile>)>::new("chol-trsm").cpu(|_, _, (l, b)| {
        for (i, j) in cells() {
            let s: f64 = (0..j).map(|k| b[i * NB + k] * l[j * NB + k]).sum();
            b[i * NB + j] = (b[i * NB + j] - s) / l[j * NB + j];
        }
        Ok(())
    });
    // c := c − a·bᵀ, reading [a, b]; [a] alone on the diagonal (c − a·aᵀ).
    let update_t =
        Codelet::<(Vec<Read<Tile>>, ReadWrite<Tile>)>::new("chol-update").cpu(|_, _, (ab, c)| {
            for (i, j) in cells() {
                c[i * NB + j] -= (0..NB)
                    .map(|k| ab[0][i * NB + k] * ab[ab.len() - 1][j * NB + k])
                    .sum::<f64>();
            }
            Ok(())
        });

    let rt = Runtime::new(Config::default())?;
    let tile = |ti, tj| {
        cells()
            .map(|(i, j)| entry(ti * NB + i, tj * NB + j))
            .collect()
    };
    let t: Vec<Vec<_>> = (0..NT)
        .map(|i| (0..NT).map(|j| rt.register::<Tile>(tile(i, j))).collect())
        .collect();
    for k in 0..NT {
        rt.task(&potrf_t, t[k][k].rw()).submit()?;
        for i in k + 1..NT {
            rt.task(&trsm_t, (t[k][k].r(), t[i][k].rw())).submit()?;
        }
        for i in k + 1..NT {
            for j in k + 1..=i {
                let ab = if i == j {
                    vec![t[i][k].r()]
                } else {
                    vec![t[i][k].r(), t[j][k].r()]
                };
                rt.task(&update_t, (ab, t[i][j].rw())).submit()?;
            }
        }
    }
    rt.wait_all()?;

    // The sequential factor of the whole matrix, against the tiles' lower part.
    let mut full: Vec<f64> = (0..N * N).map(|e| entry(e / N, e % N)).collect();
    potrf(&mut full, N);
    let mut diff = 0.0f64;
    for (ti, row) in t.into_iter().enumerate() {
        for (tj, h) in row.into_iter().enumerate().take(ti + 1) {
            let l = rt.unregister(h)?;
            for (i, j) in cells().filter(|&(i, j)| ti > tj || i >= j) {
                diff = diff.max((l[i * NB + j] - full[(ti * NB + i) * N + tj * NB + j]).abs());
            }
        }
    }
    println!("cholesky: N = {N} in {NT}×{NT} tiles; largest difference from the sequential factor {diff:.1e}");
    assert!(diff < 1e-10, "the tiled factor differs by {diff}");
    Ok(())
}

#[test]
fn runs() {
    main().unwrap();
}
