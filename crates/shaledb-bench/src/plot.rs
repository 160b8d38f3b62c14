//! Per-benchmark plots (SVG and PNG): throughput over time with write stalls shaded, latency percentiles
//! over time on a log scale, and bytes per LSM level over time (stacked) with the compaction debt. The
//! PNG's text uses Noto Sans (Apache-2.0, `assets/`), embedded in the binary.

use crate::recorder::{LsmPoint, TickSummary};
use crate::report::BenchResult;
use crate::{BenchError, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static FONT: &[u8] = include_bytes!("../assets/NotoSans-Regular.ttf");
pub(crate) const FAMILY: &str = "sans-serif";
const SIZE: (u32, u32) = (1200, 1200);
/// Points per series after downsampling, enough for a 1200-pixel-wide plot.
const MAX_POINTS: usize = 600;

pub(crate) fn ensure_font() -> std::result::Result<(), String> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| plotters::style::register_font(FAMILY, FontStyle::Normal, FONT).is_ok());
    if ok {
        Ok(())
    } else {
        Err("the embedded font did not load".into())
    }
}

/// Writes `NN-name.svg` and `NN-name.png` for `r` into `dir`; returns their paths.
pub fn write_plots(dir: &Path, index: usize, r: &BenchResult) -> Result<Vec<PathBuf>> {
    let stem = format!("{index:02}-{}", r.name);
    write_pair(dir, &stem, SIZE, &|a| draw(a, r), &|a| draw(a, r))
}

/// Merges runs of ticks so that at most `MAX_POINTS` remain: operations add up, latencies keep the
/// worst of the run (so a spike never disappears). The rate of a point is its operations over the seconds
/// its ticks really cover, so the last, partial tick of a run is no false drop.
fn downsample(ticks: &[TickSummary]) -> Vec<(f64, f64, TickSummary)> {
    let k = ticks.len().div_ceil(MAX_POINTS).max(1);
    ticks
        .chunks(k)
        .map(|c| {
            let ops: u64 = c.iter().map(|t| t.ops).sum();
            let t_end = c.last().map_or(0.0, |t| t.t);
            let secs: f64 = c.iter().map(|t| t.secs).sum();
            let rate = if secs > 0.0 { ops as f64 / secs } else { 0.0 };
            let worst = TickSummary {
                t: t_end,
                secs,
                ops,
                p50: c.iter().map(|t| t.p50).fold(0.0, f64::max),
                p99: c.iter().map(|t| t.p99).fold(0.0, f64::max),
                p999: c.iter().map(|t| t.p999).fold(0.0, f64::max),
                max: c.iter().map(|t| t.max).fold(0.0, f64::max),
            };
            (t_end, rate, worst)
        })
        .collect()
}

fn stall_bands(lsm: &[LsmPoint]) -> Vec<(f64, f64)> {
    lsm.windows(2).filter(|w| w[1].stall_micros > w[0].stall_micros).map(|w| (w[0].t, w[1].t)).collect()
}

/// A latency line: label, colour, and the field it plots.
type LatencySeries = (&'static str, RGBColor, fn(&TickSummary) -> f64);

/// Axis labels: 350K, 1.2M, 12.5, 0.25.
fn human(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.0}K", v / 1e3)
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn e<T: std::fmt::Display>(x: T) -> String {
    x.to_string()
}

fn draw<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, r: &BenchResult) -> std::result::Result<(), String> {
    root.fill(&WHITE).map_err(e)?;
    let title = format!(
        "{}: {:.0} ops/s, p99 {:.1} us, p99.9 {:.1} us, W-Amp {:.1}, {} thread{}",
        r.name,
        r.ops_per_sec,
        r.latency.p99,
        r.latency.p999,
        r.w_amp,
        r.threads,
        if r.threads == 1 { "" } else { "s" }
    );
    let root = root.titled(&title, (FAMILY, 24)).map_err(e)?;
    let panels = root.split_evenly((3, 1));
    let pts = downsample(&r.timeline);
    let t_end = pts.last().map_or(0.0, |p| p.0).max(r.lsm.last().map_or(0.0, |p| p.t)).max(r.seconds).max(1e-3);
    let bands = stall_bands(&r.lsm);

    // Throughput.
    let max_rate = pts.iter().map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.1;
    let mut c = ChartBuilder::on(&panels[0])
        .caption("throughput (operations per second; red: writes stalled)", (FAMILY, 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..t_end, 0.0..max_rate)
        .map_err(e)?;
    c.configure_mesh()
        .x_desc("seconds")
        .y_desc("ops/s")
        .y_label_formatter(&|v| human(*v))
        .label_style((FAMILY, 14))
        .draw()
        .map_err(e)?;
    c.draw_series(bands.iter().map(|&(a, b)| Rectangle::new([(a, 0.0), (b, max_rate)], RED.mix(0.15).filled())))
        .map_err(e)?;
    c.draw_series(
        AreaSeries::new(pts.iter().map(|p| (p.0, p.1)), 0.0, BLUE.mix(0.2)).border_style(BLUE.stroke_width(2)),
    )
    .map_err(e)?;

    // Latency.
    let lat: Vec<f64> = pts.iter().flat_map(|p| [p.2.p50, p.2.max]).filter(|v| *v > 0.0).collect();
    let lo = lat.iter().copied().fold(f64::INFINITY, f64::min);
    let (lo, hi) =
        if lo.is_finite() { (lo * 0.8, lat.iter().copied().fold(0.0, f64::max) * 1.25) } else { (0.1, 10.0) };
    let mut c = ChartBuilder::on(&panels[1])
        .caption("latency (microseconds, log scale)", (FAMILY, 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..t_end, (lo.max(1e-3)..hi.max(lo * 10.0)).log_scale())
        .map_err(e)?;
    c.configure_mesh()
        .x_desc("seconds")
        .y_desc("us")
        .y_label_formatter(&|v| human(*v))
        .label_style((FAMILY, 14))
        .draw()
        .map_err(e)?;
    let series: [LatencySeries; 4] = [
        ("max", RGBColor(150, 150, 150), |t| t.max),
        ("p99.9", RED, |t| t.p999),
        ("p99", RGBColor(255, 140, 0), |t| t.p99),
        ("p50", RGBColor(0, 150, 0), |t| t.p50),
    ];
    for (label, color, get) in series {
        c.draw_series(LineSeries::new(
            pts.iter().map(|p| (p.0, get(&p.2))).filter(|p| p.1 > 0.0),
            color.stroke_width(2),
        ))
        .map_err(e)?
        .label(label)
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FAMILY, 14))
        .draw()
        .map_err(e)?;

    // Bytes per level.
    let mib = 1_048_576.0;
    let levels = r.lsm.iter().map(|p| p.level_bytes.len()).max().unwrap_or(0);
    let stacked = |upto: usize| -> Vec<(f64, f64)> {
        r.lsm.iter().map(|p| (p.t, p.level_bytes.iter().take(upto + 1).sum::<u64>() as f64 / mib)).collect()
    };
    let top = r
        .lsm
        .iter()
        .map(|p| (p.level_bytes.iter().sum::<u64>() as f64).max(p.pending_compaction_bytes as f64) / mib)
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let mut c = ChartBuilder::on(&panels[2])
        .caption("LSM shape: MiB per level (stacked) and compaction debt", (FAMILY, 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..t_end, 0.0..top)
        .map_err(e)?;
    c.configure_mesh()
        .x_desc("seconds")
        .y_desc("MiB")
        .y_label_formatter(&|v| human(*v))
        .label_style((FAMILY, 14))
        .draw()
        .map_err(e)?;
    for level in (0..levels).rev() {
        let color = Palette99::pick(level).to_rgba();
        c.draw_series(AreaSeries::new(stacked(level), 0.0, color.mix(0.6)).border_style(color))
            .map_err(e)?
            .label(format!("L{level}"))
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], color.filled()));
    }
    c.draw_series(LineSeries::new(
        r.lsm.iter().map(|p| (p.t, p.pending_compaction_bytes as f64 / mib)),
        BLACK.stroke_width(2),
    ))
    .map_err(e)?
    .label("compaction debt")
    .legend(|(x, y)| PathElement::new([(x, y), (x + 14, y)], BLACK.stroke_width(2)));
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FAMILY, 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

/// Draws one plot on an SVG drawing area.
pub(crate) type SvgDrawer<'a> = &'a dyn for<'b> Fn(&DrawingArea<SVGBackend<'b>, Shift>) -> PlotResult;
/// Draws one plot on a bitmap drawing area.
pub(crate) type PngDrawer<'a> = &'a dyn for<'b> Fn(&DrawingArea<BitMapBackend<'b>, Shift>) -> PlotResult;
/// A plot's outcome: the backend's message on failure.
pub(crate) type PlotResult = std::result::Result<(), String>;

fn plot_err(path: &Path) -> impl Fn(String) -> BenchError + '_ {
    move |msg| BenchError::Plot { path: path.to_path_buf(), msg }
}

/// Draws `draw_svg`/`draw_png` (the same drawing, once per backend) into `stem.svg` and `stem.png` of `size`
/// pixels under `dir`; returns the two paths.
pub(crate) fn write_pair(
    dir: &Path,
    stem: &str,
    size: (u32, u32),
    draw_svg: SvgDrawer<'_>,
    draw_png: PngDrawer<'_>,
) -> Result<Vec<PathBuf>> {
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    ensure_font().map_err(plot_err(&svg))?;
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        draw_svg(&root).map_err(plot_err(&svg))?;
        root.present().map_err(|e| e.to_string()).map_err(plot_err(&svg))?;
    }
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        draw_png(&root).map_err(plot_err(&png))?;
        root.present().map_err(|e| e.to_string()).map_err(plot_err(&png))?;
    }
    Ok(vec![svg, png])
}

/// Creates the directory of a suite's plots.
pub(crate) fn create_plot_dir(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|source| BenchError::Io {
        what: "creating plot directory",
        path: dir.to_path_buf(),
        cause: source,
    })
}

/// What a suite's bar chart shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BarScale {
    /// Ratios around 1.0 (a line marks 1.0; bars below it are red).
    Ratio,
    /// Positive figures on a log axis (bars of 0 are left out).
    Log,
}

/// Sizes of a bar chart's text: the caption's font size and the width of the label area left of the bars.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BarStyle {
    /// Caption font size.
    pub caption: u32,
    /// Label area width of a [`BarScale::Ratio`] chart.
    pub ratio_labels: u32,
    /// Label area width of a [`BarScale::Log`] chart.
    pub log_labels: u32,
}

/// Horizontal bars, one per `(label, value)`, the first on top, white-outlined so neighbours stay apart.
pub(crate) fn draw_bar_chart<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    bars: &[(String, f64)],
    scale: BarScale,
    style: BarStyle,
) -> PlotResult {
    let family = FAMILY;
    root.fill(&WHITE).map_err(e)?;
    // The first bar on top.
    let bars: Vec<(String, f64)> = bars.iter().rev().cloned().collect();
    let n = bars.len().max(1);
    let labels: Vec<String> = bars.iter().map(|b| b.0.clone()).collect();
    let label_of = move |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) => labels.get(*i).cloned().unwrap_or_default(),
        _ => String::new(),
    };
    // A white outline over each bar keeps neighbouring bars apart.
    let gap = |from: f64, i: usize, to: f64| {
        Rectangle::new([(from, SegmentValue::Exact(i)), (to, SegmentValue::Exact(i + 1))], WHITE.stroke_width(6))
    };
    match scale {
        BarScale::Ratio => {
            let hi = bars.iter().map(|b| b.1).fold(1.0, f64::max) * 1.15;
            let mut ch = ChartBuilder::on(root)
                .caption(title, (family, style.caption))
                .margin(15)
                .x_label_area_size(40)
                .y_label_area_size(style.ratio_labels)
                .build_cartesian_2d(0.0..hi, (0..n).into_segmented())
                .map_err(e)?;
            ch.configure_mesh()
                .y_labels(n)
                .y_label_formatter(&label_of)
                .x_desc("ratio")
                .label_style((family, 14))
                .draw()
                .map_err(e)?;
            ch.draw_series(bars.iter().enumerate().map(|(i, b)| {
                let color = if b.1 >= 1.0 { RGBColor(40, 120, 200) } else { RGBColor(220, 90, 60) };
                Rectangle::new([(0.0, SegmentValue::Exact(i)), (b.1, SegmentValue::Exact(i + 1))], color.filled())
            }))
            .map_err(e)?;
            ch.draw_series(bars.iter().enumerate().map(|(i, b)| gap(0.0, i, b.1))).map_err(e)?;
            ch.draw_series(LineSeries::new(
                [(1.0, SegmentValue::Exact(0)), (1.0, SegmentValue::Exact(n))],
                BLACK.stroke_width(2),
            ))
            .map_err(e)?;
        }
        BarScale::Log => {
            let positive: Vec<f64> = bars.iter().map(|b| b.1).filter(|v| *v > 0.0).collect();
            let lo = positive.iter().copied().fold(f64::INFINITY, f64::min);
            let lo = if lo.is_finite() { lo / 2.0 } else { 0.1 };
            let hi = positive.iter().copied().fold(lo * 10.0, f64::max) * 2.0;
            let mut ch = ChartBuilder::on(root)
                .caption(title, (family, style.caption))
                .margin(15)
                .x_label_area_size(40)
                .y_label_area_size(style.log_labels)
                .build_cartesian_2d((lo..hi).log_scale(), (0..n).into_segmented())
                .map_err(e)?;
            ch.configure_mesh().y_labels(n).y_label_formatter(&label_of).label_style((family, 14)).draw().map_err(e)?;
            ch.draw_series(bars.iter().enumerate().filter(|(_, b)| b.1 > 0.0).map(|(i, b)| {
                Rectangle::new(
                    [(lo, SegmentValue::Exact(i)), (b.1, SegmentValue::Exact(i + 1))],
                    RGBColor(40, 120, 200).filled(),
                )
            }))
            .map_err(e)?;
            ch.draw_series(bars.iter().enumerate().filter(|(_, b)| b.1 > 0.0).map(|(i, b)| gap(lo, i, b.1)))
                .map_err(e)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Percentiles;

    fn sample_result() -> BenchResult {
        let timeline = (0..50)
            .map(|i| TickSummary {
                t: (i + 1) as f64 * 0.1,
                secs: 0.1,
                ops: if (20..25).contains(&i) { 0 } else { 1000 + i },
                p50: 2.0,
                p99: 20.0,
                p999: 200.0 + i as f64,
                max: 900.0,
            })
            .collect();
        let lsm = (0..50)
            .map(|i| LsmPoint {
                t: i as f64 * 0.1,
                level_bytes: vec![(i % 7) * 1_000_000, i * 3_000_000, 0, 0, 0, 0, 40_000_000],
                pending_compaction_bytes: i * 500_000,
                memtable_bytes: 1_000_000,
                stall_micros: if i > 20 { 5_000 } else { 0 },
            })
            .collect();
        BenchResult {
            name: "fillrandom".into(),
            threads: 1,
            ops: 50_000,
            seconds: 5.0,
            ops_per_sec: 10_000.0,
            latency: Percentiles { p99: 20.0, p999: 200.0, ..Percentiles::default() },
            timeline,
            lsm,
            tick_secs: 0.1,
            ..BenchResult::default()
        }
    }

    #[test]
    fn plots_are_written_and_not_empty() {
        let dir = tempfile::tempdir().unwrap();
        let files = write_plots(dir.path(), 3, &sample_result()).unwrap();
        assert_eq!(files.len(), 2);
        for f in &files {
            let len = std::fs::metadata(f).unwrap().len();
            assert!(len > 10_000, "{} is {len} bytes", f.display());
        }
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.contains("<svg") && svg.contains("throughput") && svg.contains("L6"));
        let png = std::fs::read(&files[1]).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert!(files[0].ends_with("03-fillrandom.svg"));
    }

    #[test]
    fn empty_series_still_plot() {
        let dir = tempfile::tempdir().unwrap();
        let r = BenchResult { name: "compact".into(), ..BenchResult::default() };
        write_plots(dir.path(), 1, &r).unwrap();
    }

    #[test]
    fn axis_labels_are_short() {
        assert_eq!(human(350_000.0), "350K");
        assert_eq!(human(1_250_000.0), "1.2M");
        assert_eq!(human(12.5), "12.5");
        assert_eq!(human(0.25), "0.25");
        assert_eq!(human(0.0), "0");
        assert_eq!(human(2500.0), "2500");
    }

    #[test]
    fn downsampling_keeps_totals_and_spikes() {
        let ticks: Vec<TickSummary> = (0..1300)
            .map(|i| TickSummary {
                t: i as f64,
                secs: 1.0,
                ops: 10,
                max: if i == 777 { 1e6 } else { 5.0 },
                ..Default::default()
            })
            .collect();
        let d = downsample(&ticks);
        assert!(d.len() <= MAX_POINTS);
        assert_eq!(d.iter().map(|p| p.2.ops).sum::<u64>(), 13_000);
        assert!(d.iter().any(|p| p.2.max == 1e6));
        assert!(d.iter().all(|p| (p.1 - 10.0).abs() < 1e-9));
    }

    /// A steady 1000 ops/s whose run ends 30 ms into its last 100 ms tick: the last point is 1000 ops/s too,
    /// not the 300 a whole tick's length gave.
    #[test]
    fn the_last_partial_tick_is_no_false_drop() {
        let mut ticks: Vec<TickSummary> = (0..10)
            .map(|i| TickSummary { t: (i + 1) as f64 * 0.1, secs: 0.1, ops: 100, ..Default::default() })
            .collect();
        ticks.push(TickSummary { t: 1.03, secs: 0.03, ops: 30, ..Default::default() });
        let d = downsample(&ticks);
        assert_eq!(d.len(), 11);
        for p in &d {
            assert!((p.1 - 1000.0).abs() < 1e-6, "rate {} at {}", p.1, p.0);
        }
        // Merged into fewer points, the partial tick still counts for its own length only.
        let many: Vec<TickSummary> = (0..1201)
            .map(|i| {
                let secs = if i == 1200 { 0.01 } else { 0.1 };
                TickSummary {
                    t: i as f64 * 0.1 + secs,
                    secs,
                    ops: (secs * 1000.0).round() as u64,
                    ..Default::default()
                }
            })
            .collect();
        let d = downsample(&many);
        assert!(d.len() <= MAX_POINTS);
        for p in &d {
            assert!((p.1 - 1000.0).abs() < 1e-6, "rate {} at {}", p.1, p.0);
        }
    }
}
