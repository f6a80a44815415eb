//! Gantt charts of a trace: one row per worker (and per transfer node pair),
//! coloured by codelet, drawn as SVG or PNG with plotters; in a merged trace
//! of several ranks, a line per remote edge from the end of the sending task
//! to the start of the receiving one.
//!
//! Drawing cost is O(pixels), not O(tasks): each row is rasterised into pixel
//! columns first (how much of the column is busy, and with which codelet most),
//! then runs of equal columns become one rectangle. Tasks closer than a pixel
//! merge; a column that is only partly busy is drawn in a paler shade, so a
//! row of many tiny tasks still shows how busy it was.

use std::collections::HashMap;
use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::prelude::*;
use tessera_engine::fmt::duration_ns;
use tessera_engine::trace::{CodeletColors, Nanos, Trace};

/// DejaVu Sans (Bitstream Vera licence, see `assets/DejaVuSans-LICENSE.txt`),
/// embedded so that text renders on machines without fonts.
static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
const FAMILY: &str = "sans-serif";
const TRANSFER_RGB: [u8; 3] = [120, 120, 120];
/// Shades between idle and fully busy for partly busy pixel columns.
const LEVELS: f64 = 8.0;
/// Remote edges' lines (a merged trace of several ranks).
const EDGE_RGB: RGBColor = RGBColor(20, 20, 20);
/// At most this many remote edges are drawn (evenly chosen among them): more
/// lines than pixels hide the chart, and an SVG grows with each.
const MAX_EDGE_LINES: usize = 4_000;
/// The largest image side we agree to draw (a 16k × 16k RGB bitmap is 768 MiB).
const MAX_SIDE: u32 = 16_384;

fn register_font() -> Result<(), String> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        plotters::style::register_font(FAMILY, FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font cannot be parsed".to_owned())
    })
    .clone()
}

/// Draws `trace` into `path`, as SVG or PNG according to the extension.
/// The image is drawn in memory, then saved as every other output is
/// ([`tessera_engine::util::write_atomically`]): a failed save leaves the
/// previous file, and a FIFO nobody reads or a folder is an error, not a
/// hang in `open` (issue 42: plotters opened the path itself).
pub fn render(trace: &Trace, path: &Path, width: u32, height: u32) -> Result<(), String> {
    if !(320..=MAX_SIDE).contains(&width) || !(200..=MAX_SIDE).contains(&height) {
        return Err(format!(
            "image size {width}x{height} out of range (width 320..={MAX_SIDE}, height 200..={MAX_SIDE})"
        ));
    }
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    register_font()?;
    let err = |e: String| format!("{}: {e}", path.display());
    let bytes = match ext.as_deref() {
        Some("svg") => {
            let mut text = String::new();
            {
                let root = SVGBackend::with_string(&mut text, (width, height)).into_drawing_area();
                draw(trace, &root).map_err(err)?;
                root.present().map_err(|e| err(e.to_string()))?;
            }
            text.into_bytes()
        }
        Some("png") => {
            let mut rgb = vec![0u8; width as usize * height as usize * 3];
            {
                let root =
                    BitMapBackend::with_buffer(&mut rgb, (width, height)).into_drawing_area();
                draw(trace, &root).map_err(err)?;
                root.present().map_err(|e| err(e.to_string()))?;
            }
            encode_png(&rgb, width, height).map_err(|e| err(e.to_string()))?
        }
        _ => {
            return Err(format!(
                "{}: unsupported image format (use a .svg or .png file name)",
                path.display()
            ))
        }
    };
    tessera_engine::util::write_atomically(path, |mut f| {
        use std::io::Write;
        f.write_all(&bytes)
    })
    .map_err(|e| err(e.to_string()))
}

/// An RGB image of `width × height` as PNG bytes.
fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>, png::EncodingError> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header()?;
    writer.write_image_data(rgb)?;
    writer.finish()?;
    Ok(bytes)
}

/// A horizontal band of the chart and what is drawn in it.
struct Row {
    label: String,
    /// `(start, end, colour key)`.
    spans: Vec<(Nanos, Nanos, usize)>,
}

/// Rows: workers in index order, then one per (from, to) transfer pair.
fn rows(trace: &Trace, key_of: &HashMap<&str, usize>, transfer_key: usize) -> Vec<Row> {
    // A merged trace of several ranks: "r1 cpu0".
    let mut rows: Vec<Row> = trace
        .worker_labels()
        .into_iter()
        .map(|label| Row {
            label,
            spans: Vec::new(),
        })
        .collect();
    for t in &trace.tasks {
        rows[t.worker as usize]
            .spans
            .push((t.start, t.end, key_of[t.codelet.as_str()]));
    }
    let mut pairs: Vec<(u32, u32)> = trace
        .transfers
        .iter()
        .map(|x| (x.from_node, x.to_node))
        .collect();
    pairs.sort_unstable();
    pairs.dedup();
    let first = rows.len();
    rows.extend(pairs.iter().map(|(a, b)| Row {
        label: format!("transfer {a}→{b}"),
        spans: Vec::new(),
    }));
    for x in &trace.transfers {
        let r = first + pairs.binary_search(&(x.from_node, x.to_node)).unwrap_or(0);
        rows[r].spans.push((x.start, x.end, transfer_key));
    }
    rows
}

/// One run of equal pixel columns: `[col0, col1)`, colour key and shade level (1..=LEVELS).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Run {
    col0: usize,
    col1: usize,
    key: usize,
    level: u8,
}

/// Rasterises one row's spans into `ncols` pixel columns covering
/// `[t0, t0 + ncols * ns_per_col)` and merges equal neighbours.
///
/// O(spans + keys_in_row × ncols): a span adds its partial first and last
/// columns directly and its fully covered middle through a difference array.
fn rasterise(
    spans: &[(Nanos, Nanos, usize)],
    t0: Nanos,
    ns_per_col: f64,
    ncols: usize,
) -> Vec<Run> {
    if spans.is_empty() || ncols == 0 {
        return Vec::new();
    }
    // Local slot per colour key used in this row.
    let mut keys: Vec<usize> = spans.iter().map(|s| s.2).collect();
    keys.sort_unstable();
    keys.dedup();
    let slot = |key: usize| keys.binary_search(&key).unwrap_or(0);
    let mut cover = vec![0f64; keys.len() * ncols];
    let mut diff = vec![0f64; keys.len() * (ncols + 1)];
    let width = ncols as f64;
    for &(start, end, key) in spans {
        let x0 = ((start.saturating_sub(t0)) as f64 / ns_per_col).clamp(0.0, width);
        let x1 = ((end.saturating_sub(t0)) as f64 / ns_per_col).clamp(x0, width);
        let (c0, c1) = (x0 as usize, x1 as usize);
        let (cover, diff) = (
            &mut cover[slot(key) * ncols..][..ncols],
            &mut diff[slot(key) * (ncols + 1)..][..ncols + 1],
        );
        if c0 == c1 {
            if c0 < ncols {
                cover[c0] += x1 - x0;
            }
            continue;
        }
        cover[c0] += (c0 + 1) as f64 - x0;
        diff[c0 + 1] += 1.0;
        diff[c1] -= 1.0;
        if c1 < ncols {
            cover[c1] += x1 - c1 as f64;
        }
    }
    for k in 0..keys.len() {
        let mut acc = 0.0;
        for c in 0..ncols {
            acc += diff[k * (ncols + 1) + c];
            cover[k * ncols + c] += acc;
        }
    }
    let mut runs: Vec<Run> = Vec::new();
    for c in 0..ncols {
        let (mut total, mut best, mut best_cover) = (0.0, 0, 0.0);
        for k in 0..keys.len() {
            let v = cover[k * ncols + c];
            total += v;
            if v > best_cover {
                (best, best_cover) = (k, v);
            }
        }
        let level = (total.min(1.0) * LEVELS).round() as u8;
        if level == 0 {
            continue;
        }
        let key = keys[best];
        match runs.last_mut() {
            Some(r) if r.col1 == c && r.key == key && r.level == level => r.col1 = c + 1,
            _ => runs.push(Run {
                col0: c,
                col1: c + 1,
                key,
                level,
            }),
        }
    }
    runs
}

/// `rgb` shaded toward white: `level / LEVELS` of the way from white to `rgb`.
fn shade(rgb: [u8; 3], level: u8) -> RGBColor {
    let a = f64::from(level) / LEVELS;
    let mix = |c: u8| (255.0 - a * (255.0 - f64::from(c))).round() as u8;
    RGBColor(mix(rgb[0]), mix(rgb[1]), mix(rgb[2]))
}

/// The vertical axis: `rows` bands of height 1, row 0 at the top; key points
/// (where labels go) at band centres, thinned out when there are more rows
/// than labels fit.
struct RowAxis {
    rows: usize,
}

impl Ranged for RowAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, v: &f64, limit: (i32, i32)) -> i32 {
        let f = v / self.rows as f64;
        limit.0 + (f64::from(limit.1 - limit.0) * f).round() as i32
    }

    fn key_points<H: KeyPointHint>(&self, hint: H) -> Vec<f64> {
        if hint.weight().allow_light_points() || hint.max_num_points() == 0 {
            return Vec::new();
        }
        let step = self.rows.div_ceil(hint.max_num_points()).max(1);
        (0..self.rows)
            .step_by(step)
            .map(|r| self.rows as f64 - r as f64 - 0.5)
            .collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        0.0..self.rows as f64
    }
}

/// A legend entry: colour, text.
type Entry = (RGBColor, String);

/// Lays legend entries out left to right, wrapping; returns (x, y, entry) and the height used.
fn legend_layout<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    entries: &[Entry],
    font: &TextStyle,
    width: u32,
) -> (Vec<(i32, i32, usize)>, u32) {
    const SWATCH: i32 = 12;
    const LINE: i32 = 20;
    let (mut x, mut y) = (10, 6);
    let mut placed = Vec::with_capacity(entries.len());
    for (i, (_, text)) in entries.iter().enumerate() {
        let text_w = area
            .estimate_text_size(text, font)
            .map_or(8 * text.len() as i32, |(w, _)| w as i32);
        let w = SWATCH + 6 + text_w + 18;
        if x > 10 && x + w > width as i32 - 10 {
            (x, y) = (10, y + LINE);
        }
        placed.push((x, y, i));
        x += w;
    }
    (placed, (y + LINE + 4) as u32)
}

fn draw<DB: DrawingBackend>(trace: &Trace, root: &DrawingArea<DB, Shift>) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (width, height) = root.dim_in_pixel();

    // Colour keys: codelets by total time (legend order), then transfers.
    let colors = CodeletColors::for_trace(trace);
    let mut time_of: HashMap<&str, Nanos> = HashMap::new();
    for t in &trace.tasks {
        *time_of.entry(&t.codelet).or_default() += t.end.saturating_sub(t.start);
    }
    let mut codelets: Vec<(&str, Nanos)> = time_of.into_iter().collect();
    codelets.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let key_of: HashMap<&str, usize> = codelets.iter().enumerate().map(|(i, c)| (c.0, i)).collect();
    let mut key_rgb: Vec<[u8; 3]> = codelets.iter().map(|c| colors.rgb(c.0)).collect();
    let transfer_key = key_rgb.len();
    key_rgb.push(TRANSFER_RGB);

    let t0 = trace
        .tasks
        .iter()
        .map(|t| t.start)
        .chain(trace.transfers.iter().map(|x| x.start))
        .min()
        .unwrap_or(0);
    let t1 = trace
        .tasks
        .iter()
        .map(|t| t.end)
        .chain(trace.transfers.iter().map(|x| x.end))
        .max()
        .unwrap_or(0);
    let span = (t1.saturating_sub(t0)).max(1);
    let task_span = match (
        trace.tasks.iter().map(|t| t.start).min(),
        trace.tasks.iter().map(|t| t.end).max(),
    ) {
        (Some(a), Some(b)) => b.saturating_sub(a),
        _ => 0,
    };

    let rows = rows(trace, &key_of, transfer_key);
    let nrows = rows.len().max(1);

    // Legend: at the bottom, as tall as its entries need (at most a third of the image).
    let legend_font: TextStyle = (FAMILY, 13).into_font().color(&BLACK);
    let total_work: Nanos = codelets.iter().map(|c| c.1).sum();
    let mut entries: Vec<Entry> = codelets
        .iter()
        .map(|&(name, t)| {
            let share = if total_work == 0 {
                0.0
            } else {
                100.0 * t as f64 / total_work as f64
            };
            (
                shade(colors.rgb(name), LEVELS as u8),
                format!("{name} ({share:.1}% of work)"),
            )
        })
        .collect();
    const MAX_ENTRIES: usize = 40;
    if entries.len() > MAX_ENTRIES {
        let more = entries.len() - MAX_ENTRIES + 1;
        entries.truncate(MAX_ENTRIES - 1);
        entries.push((
            shade([200, 200, 200], LEVELS as u8),
            format!("+{more} more codelets"),
        ));
    }
    if !trace.transfers.is_empty() {
        entries.push((shade(TRANSFER_RGB, LEVELS as u8), "transfer".to_owned()));
    }
    // Remote edges: a line from the end of the sending task to the start of
    // the receiving one.
    let remote = tessera_engine::trace::remote_edges(trace);
    let edge_step = remote.len().div_ceil(MAX_EDGE_LINES).max(1);
    if !remote.is_empty() {
        let drawn = remote.len().div_ceil(edge_step);
        entries.push((
            EDGE_RGB,
            if drawn == remote.len() {
                format!("remote edge ({})", remote.len())
            } else {
                format!("remote edge ({drawn} of {} drawn)", remote.len())
            },
        ));
    }
    let (placed, legend_h) = legend_layout(root, &entries, &legend_font, width);
    let legend_h = legend_h.min(height / 3);
    let (chart_area, legend_area) = root.split_vertically(height - legend_h);

    let title = if trace.tasks.is_empty() {
        "Tessera trace: no tasks".to_owned()
    } else {
        format!(
            "Tessera trace: {} tasks on {} workers, makespan {}",
            trace.tasks.len(),
            trace.workers.len(),
            duration_ns(task_span as f64)
        )
    };
    let label_w = rows
        .iter()
        .map(|r| {
            root.estimate_text_size(&r.label, &legend_font)
                .map_or(8 * r.label.len() as u32, |(w, _)| w)
        })
        .max()
        .unwrap_or(0)
        .clamp(30, width / 4)
        + 12;
    let span_ms = span as f64 / 1e6;
    let mut chart = ChartBuilder::on(&chart_area)
        .caption(title, (FAMILY, 20))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(label_w)
        .build_cartesian_2d(0f64..span_ms, RowAxis { rows: nrows })
        .map_err(e)?;
    let labels: Vec<&str> = rows.iter().map(|r| r.label.as_str()).collect();
    let y_label = |y: &f64| {
        let r = nrows as f64 - y - 0.5;
        labels
            .get(r.round().max(0.0) as usize)
            .copied()
            .unwrap_or("")
            .to_owned()
    };
    chart
        .configure_mesh()
        .disable_y_mesh()
        .x_desc("time since first event (ms)")
        .x_labels(10)
        .y_labels(nrows)
        .y_label_formatter(&y_label)
        .label_style((FAMILY, 13))
        .axis_desc_style((FAMILY, 14))
        .draw()
        .map_err(e)?;

    let (plot_w, _) = chart.plotting_area().dim_in_pixel();
    let ncols = plot_w.max(1) as usize;
    let ns_per_col = span as f64 / ncols as f64;
    let ms_per_col = span_ms / ncols as f64;
    for (r, row) in rows.iter().enumerate() {
        let top = nrows as f64 - r as f64 - 0.1;
        let bottom = nrows as f64 - r as f64 - 0.9;
        let runs = rasterise(&row.spans, t0, ns_per_col, ncols);
        chart
            .draw_series(runs.iter().map(|run| {
                Rectangle::new(
                    [
                        (run.col0 as f64 * ms_per_col, bottom),
                        (run.col1 as f64 * ms_per_col, top),
                    ],
                    shade(key_rgb[run.key], run.level).filled(),
                )
            }))
            .map_err(e)?;
    }

    // Rows are the workers first, in index order (see `rows`).
    let row_y = |worker: u32| nrows as f64 - f64::from(worker) - 0.5;
    let ms = |t: Nanos| t.saturating_sub(t0) as f64 / 1e6;
    chart
        .draw_series(remote.iter().step_by(edge_step).map(|e| {
            let (a, b) = (&trace.tasks[e.from], &trace.tasks[e.to]);
            PathElement::new(
                vec![(ms(a.end), row_y(a.worker)), (ms(b.start), row_y(b.worker))],
                EDGE_RGB.stroke_width(1),
            )
        }))
        .map_err(e)?;

    for (x, y, i) in placed {
        let (color, text) = &entries[i];
        if y + 14 > legend_h as i32 {
            break; // out of room: the legend was capped at a third of the image
        }
        legend_area
            .draw(&Rectangle::new(
                [(x, y + 2), (x + 12, y + 14)],
                color.filled(),
            ))
            .map_err(e)?;
        legend_area
            .draw(&Text::new(
                text.as_str(),
                (x + 18, y + 1),
                legend_font.clone(),
            ))
            .map_err(e)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    // Proves that charts come out at the requested size, are not blank, name
    // every worker, and that rasterising merges sub-pixel tasks into O(pixels) rectangles.
    use super::*;
    use tessera_engine::trace::{TaskRecord, TransferRecord, WorkerInfo};

    fn synthetic(ntasks: u64, nworkers: u32) -> Trace {
        let codelets = ["getrf", "trsm", "gemm", "syrk"];
        let mut next_free = vec![0u64; nworkers as usize];
        let tasks = (0..ntasks)
            .map(|i| {
                let w = (i % u64::from(nworkers)) as usize;
                let start = next_free[w] + (i * 7919) % 300;
                let end = start + 500 + (i * 104_729) % 2_000;
                next_free[w] = end;
                TaskRecord {
                    id: i,
                    codelet: codelets[(i / 3 % 4) as usize].into(),
                    label: None,
                    worker: w as u32,
                    priority: 0,
                    flops: 1e6,
                    start,
                    end,
                    team_rank: 0,
                }
            })
            .collect();
        Trace {
            workers: (0..nworkers)
                .map(|i| WorkerInfo {
                    name: format!("cpu{i}"),
                    memory_node: 0,
                })
                .collect(),
            tasks,
            transfers: (0..50)
                .map(|i| TransferRecord {
                    handle: i,
                    from_node: 0,
                    to_node: 1,
                    bytes: 1 << 20,
                    start: i * 40_000,
                    end: i * 40_000 + 15_000,
                })
                .collect(),
            edges: vec![],
            ..Trace::default()
        }
    }

    fn temp_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("tessera-gantt-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn png_has_the_size_asked_and_is_not_blank() {
        let dir = temp_dir("png");
        let path = dir.join("chart.png");
        render(&synthetic(10_000, 8), &path, 1000, 600).unwrap();
        let decoder = png::Decoder::new(std::fs::File::open(&path).unwrap());
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (1000, 600));
        let px = info.color_type.samples();
        let mut colours: Vec<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
        colours.sort_unstable();
        colours.dedup();
        assert!(
            colours.len() > 10,
            "only {} distinct colours",
            colours.len()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn svg_names_every_worker() {
        let dir = temp_dir("svg");
        let path = dir.join("chart.SVG");
        let trace = synthetic(2_000, 5);
        render(&trace, &path, 800, 500).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        for w in &trace.workers {
            assert!(
                svg.contains(&format!("\n{}\n</text>", w.name)),
                "{} missing",
                w.name
            );
        }
        assert!(svg.contains("gemm"), "legend");
        assert!(svg.contains("makespan"), "title");
        // O(pixels): far fewer rectangles than tasks.
        assert!(
            svg.matches("<rect").count() < 5 * 800,
            "{}",
            svg.matches("<rect").count()
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_requests_are_errors() {
        let dir = temp_dir("bad");
        let trace = synthetic(10, 2);
        let e = render(&trace, &dir.join("chart.jpg"), 800, 600).unwrap_err();
        assert!(e.contains("unsupported image format"), "{e}");
        let e = render(&trace, &dir.join("chart.png"), 0, 600).unwrap_err();
        assert!(e.contains("out of range"), "{e}");
        let e = render(&trace, &dir.join("no/such/dir/chart.png"), 800, 600).unwrap_err();
        assert!(e.contains("no/such/dir/chart.png"), "{e}");
        render(&Trace::default(), &dir.join("empty.svg"), 800, 600).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn rasterise_merges_and_shades() {
        // 1000 back-to-back 1 ns tasks of one key over 10 columns: one full run.
        let spans: Vec<_> = (0..1000).map(|i| (i, i + 1, 3)).collect();
        assert_eq!(
            rasterise(&spans, 0, 100.0, 10),
            vec![Run {
                col0: 0,
                col1: 10,
                key: 3,
                level: 8
            }]
        );
        // Half-busy columns come out at half shade; the dominant key wins.
        let spans: Vec<_> = (0..100)
            .map(|i| (20 * i, 20 * i + 10, if i % 4 == 0 { 1 } else { 2 }))
            .collect();
        assert_eq!(
            rasterise(&spans, 0, 200.0, 10),
            vec![Run {
                col0: 0,
                col1: 10,
                key: 2,
                level: 4
            }]
        );
        // A long task covers its middle columns fully and its edges partly.
        let runs = rasterise(&[(150, 950, 0)], 0, 100.0, 10);
        assert_eq!(
            runs,
            vec![
                Run {
                    col0: 1,
                    col1: 2,
                    key: 0,
                    level: 4
                },
                Run {
                    col0: 2,
                    col1: 9,
                    key: 0,
                    level: 8
                },
                Run {
                    col0: 9,
                    col1: 10,
                    key: 0,
                    level: 4
                },
            ]
        );
    }
}
