//! Byte codecs of what the solve exchanges through collectives (which carry
//! bytes): each panel's pivots, and blocks of the solution vector.

pub(super) fn encode_usizes(v: &[(usize, Vec<usize>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (k, p) in v {
        out.extend_from_slice(&(*k as u64).to_le_bytes());
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        for &x in p {
            out.extend_from_slice(&(x as u64).to_le_bytes());
        }
    }
    out
}

pub(super) fn decode_usizes(b: &[u8]) -> Result<Vec<(usize, Vec<usize>)>, String> {
    let words: Vec<u64> = b
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect();
    let mut out = Vec::new();
    let mut at = 0;
    while at < words.len() {
        let (k, n) = (
            words[at] as usize,
            words.get(at + 1).copied().unwrap_or(0) as usize,
        );
        let end = at + 2 + n;
        let p = words.get(at + 2..end).ok_or("truncated pivot list")?;
        out.push((k, p.iter().map(|&x| x as usize).collect()));
        at = end;
    }
    Ok(out)
}

pub(super) fn f64s(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(super) fn from_f64s(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

#[cfg(test)]
mod tests {
    //! Proves that both codecs round-trip exactly (every `f64` bit pattern
    //! included) and that a cut pivot list is refused.

    use super::*;

    #[test]
    fn pivot_lists_round_trip() {
        let lists = vec![
            (0, vec![2, 1, 2]),
            (3, vec![]),
            (7, vec![0]),
            (usize::MAX >> 1, vec![u32::MAX as usize + 5, 0, 9]),
        ];
        let bytes = encode_usizes(&lists);
        // Per list: its step, its length, then its pivots, 8 bytes each.
        assert_eq!(bytes.len(), 8 * (2 + 3 + 2 + 2 + 1 + 2 + 3));
        assert_eq!(bytes[..8], 0u64.to_le_bytes());
        assert_eq!(bytes[8..16], 3u64.to_le_bytes());
        assert_eq!(decode_usizes(&bytes).unwrap(), lists);
        assert_eq!(encode_usizes(&[]), Vec::<u8>::new());
        assert_eq!(decode_usizes(&[]).unwrap(), vec![]);
    }

    #[test]
    fn a_cut_pivot_list_is_refused() {
        let bytes = encode_usizes(&[(1, vec![4, 5, 6])]);
        for cut in [8, 16, 24, 32] {
            assert!(
                decode_usizes(&bytes[..cut]).is_err(),
                "{cut} of {} bytes",
                bytes.len()
            );
        }
    }

    #[test]
    fn f64s_round_trip_bit_for_bit() {
        let v = [
            0.0,
            -0.0,
            1.5,
            -2.25e-300,
            f64::MIN_POSITIVE / 4.0, // subnormal
            f64::MAX,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
        ];
        let bytes = f64s(&v);
        assert_eq!(bytes.len(), 8 * v.len());
        assert_eq!(bytes[16..24], 1.5f64.to_le_bytes());
        let back = from_f64s(&bytes);
        assert_eq!(back.len(), v.len());
        for (a, b) in v.iter().zip(&back) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
        assert!(from_f64s(&f64s(&[])).is_empty());
    }
}
