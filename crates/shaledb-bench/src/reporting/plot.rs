//! Per-benchmark plots (SVG and PNG): throughput over time with write stalls shaded, latency percentiles
//! over time on a log scale, and bytes per LSM level over time (stacked) with the compaction debt. The
//! PNG's text uses Noto Sans (Apache-2.0, `assets/`), embedded in the binary.

use crate::reporting::recorder::{LsmPoint, TickSummary};
use crate::reporting::report::BenchResult;
use crate::{BenchError, Result};
use plotters::coord::combinators::LogCoord;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static FONT: &[u8] = include_bytes!("../../assets/NotoSans-Regular.ttf");
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
pub(crate) fn human(v: f64) -> String {
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
        .build_cartesian_2d(0.0..t_end, {
            let (lo, hi) = (lo.max(1e-3), hi.max(lo * 10.0));
            log_axis(lo, hi, log_ticks(lo, hi))
        })
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

/// An axis labelled at given points only (`points`), mapping values as `inner` does. (plotters'
/// `with_key_points` does the same, but its f64 and log axes then take no label formatter.)
pub(crate) struct Ticked<R: Ranged<ValueType = f64>> {
    inner: R,
    points: Vec<f64>,
}

impl<R: Ranged<ValueType = f64>> Ranged for Ticked<R> {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;
    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.inner.map(value, limit)
    }
    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.points.clone()
    }
    fn range(&self) -> std::ops::Range<f64> {
        self.inner.range()
    }
    fn axis_pixel_range(&self, limit: (i32, i32)) -> std::ops::Range<i32> {
        self.inner.axis_pixel_range(limit)
    }
}

/// The category axis of a bar chart with `n` bars: `0..n` (bar `i` fills `i..i+1`, so there is no empty
/// slot), labelled at the bars' centres only. (plotters' segmented integer axis over `0..n` has `n + 1` slots:
/// it left an empty one above the top bar.)
pub(crate) fn category_axis(n: usize) -> Ticked<RangedCoordf64> {
    Ticked { inner: (0.0..n.max(1) as f64).into(), points: category_centres(n) }
}

/// A log axis from `lo` to `hi` labelled at `ticks`.
pub(crate) fn log_axis(lo: f64, hi: f64, ticks: Vec<f64>) -> Ticked<LogCoord<f64>> {
    Ticked { inner: (lo..hi).log_scale().into(), points: ticks }
}

/// The centres of `n` bars on [`category_axis`].
pub(crate) fn category_centres(n: usize) -> Vec<f64> {
    (0..n).map(|i| i as f64 + 0.5).collect()
}

/// The label of the bar whose slot holds `v` on [`category_axis`].
pub(crate) fn category_label(labels: &[String], v: f64) -> String {
    if v < 0.0 {
        return String::new();
    }
    labels.get(v.floor() as usize).cloned().unwrap_or_default()
}

/// Values spanning less than this factor (largest over smallest positive) get a linear axis from 0; wider
/// ones a log axis.
pub(crate) const LOG_SPAN: f64 = 10.0;

/// The value axis of a bar chart, chosen from the values it shows.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ValueAxis {
    /// Linear from 0 to `hi` (plotters places its labels: round values from 0 up).
    Linear {
        /// The axis' end, a little above the largest value.
        hi: f64,
    },
    /// Logarithmic from `lo` to `hi` with labels at `ticks` (all within the range).
    Log {
        /// The axis' start, a little below the smallest positive value.
        lo: f64,
        /// The axis' end, a little above the largest value.
        hi: f64,
        /// Where the labels go.
        ticks: Vec<f64>,
    },
}

/// A linear axis from 0 when the positive `values` span less than [`LOG_SPAN`], else a log axis over their
/// range with [`log_ticks`].
pub(crate) fn value_axis(values: &[f64]) -> ValueAxis {
    let positive: Vec<f64> = values.iter().copied().filter(|v| v.is_finite() && *v > 0.0).collect();
    let min = positive.iter().copied().fold(f64::INFINITY, f64::min);
    let max = positive.iter().copied().fold(0.0, f64::max);
    if !min.is_finite() || max / min < LOG_SPAN {
        return ValueAxis::Linear { hi: if max > 0.0 { max * 1.15 } else { 1.0 } };
    }
    let (lo, hi) = (min / 1.5, max * 1.5);
    ValueAxis::Log { lo, hi, ticks: log_ticks(lo, hi) }
}

/// Labels for a log axis from `lo` to `hi`: 1, 2 and 5 times each power of 10 inside the range; when that
/// gives fewer than 4, every integer multiple (1..9); when more than 12, the powers of 10 alone.
pub(crate) fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && lo.is_finite() && hi.is_finite()) {
        return Vec::new();
    }
    let within = |mantissas: &[f64]| -> Vec<f64> {
        let mut v = Vec::new();
        let mut exp = lo.log10().floor() as i32;
        while 10f64.powi(exp) <= hi {
            for m in mantissas {
                let t = m * 10f64.powi(exp);
                if t >= lo && t <= hi {
                    v.push(t);
                }
            }
            exp += 1;
        }
        v
    };
    let v = within(&[1.0, 2.0, 5.0]);
    if v.len() < 4 {
        within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0])
    } else if v.len() > 12 {
        within(&[1.0])
    } else {
        v
    }
}

/// What a suite's bar chart shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BarScale {
    /// Ratios around 1.0 (a line marks 1.0; bars below it are red).
    Ratio,
    /// Positive figures (bars of 0 are left out) on the axis [`value_axis`] picks: linear from 0 when they
    /// span less than [`LOG_SPAN`], log with labels inside their range otherwise.
    Figures,
}

/// Sizes of a bar chart's text: the caption's font size and the width of the label area left of the bars.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BarStyle {
    /// Caption font size.
    pub caption: u32,
    /// Label area width of a [`BarScale::Ratio`] chart.
    pub ratio_labels: u32,
    /// Label area width of a [`BarScale::Figures`] chart.
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
    let label_of = move |v: &f64| category_label(&labels, *v);
    let slot = |i: usize| (i as f64, (i + 1) as f64);
    // A white outline over each bar keeps neighbouring bars apart.
    let gap =
        |from: f64, i: usize, to: f64| Rectangle::new([(from, slot(i).0), (to, slot(i).1)], WHITE.stroke_width(6));
    match scale {
        BarScale::Ratio => {
            let hi = bars.iter().map(|b| b.1).fold(1.0, f64::max) * 1.15;
            let mut ch = ChartBuilder::on(root)
                .caption(title, (family, style.caption))
                .margin(15)
                .x_label_area_size(40)
                .y_label_area_size(style.ratio_labels)
                .build_cartesian_2d(0.0..hi, category_axis(n))
                .map_err(e)?;
            ch.configure_mesh()
                .y_label_formatter(&label_of)
                .x_desc("ratio")
                .label_style((family, 14))
                .draw()
                .map_err(e)?;
            ch.draw_series(bars.iter().enumerate().map(|(i, b)| {
                let color = if b.1 >= 1.0 { RGBColor(40, 120, 200) } else { RGBColor(220, 90, 60) };
                Rectangle::new([(0.0, slot(i).0), (b.1, slot(i).1)], color.filled())
            }))
            .map_err(e)?;
            ch.draw_series(bars.iter().enumerate().map(|(i, b)| gap(0.0, i, b.1))).map_err(e)?;
            ch.draw_series(LineSeries::new([(1.0, 0.0), (1.0, n as f64)], BLACK.stroke_width(2))).map_err(e)?;
        }
        BarScale::Figures => {
            let values: Vec<f64> = bars.iter().map(|b| b.1).collect();
            let fill = RGBColor(40, 120, 200);
            let shown = || bars.iter().enumerate().filter(|(_, b)| b.1 > 0.0);
            match value_axis(&values) {
                ValueAxis::Linear { hi } => {
                    let mut ch = ChartBuilder::on(root)
                        .caption(title, (family, style.caption))
                        .margin(15)
                        .x_label_area_size(40)
                        .y_label_area_size(style.log_labels)
                        .build_cartesian_2d(0.0..hi, category_axis(n))
                        .map_err(e)?;
                    ch.configure_mesh()
                        .y_label_formatter(&label_of)
                        .x_label_formatter(&|v| human(*v))
                        .x_desc("linear scale")
                        .label_style((family, 14))
                        .draw()
                        .map_err(e)?;
                    ch.draw_series(
                        shown().map(|(i, b)| Rectangle::new([(0.0, slot(i).0), (b.1, slot(i).1)], fill.filled())),
                    )
                    .map_err(e)?;
                    ch.draw_series(shown().map(|(i, b)| gap(0.0, i, b.1))).map_err(e)?;
                }
                ValueAxis::Log { lo, hi, ticks } => {
                    let mut ch = ChartBuilder::on(root)
                        .caption(title, (family, style.caption))
                        .margin(15)
                        .x_label_area_size(40)
                        .y_label_area_size(style.log_labels)
                        .build_cartesian_2d(log_axis(lo, hi, ticks), category_axis(n))
                        .map_err(e)?;
                    ch.configure_mesh()
                        .y_label_formatter(&label_of)
                        .x_label_formatter(&|v| human(*v))
                        .x_desc("log scale")
                        .label_style((family, 14))
                        .draw()
                        .map_err(e)?;
                    ch.draw_series(
                        shown().map(|(i, b)| Rectangle::new([(lo, slot(i).0), (b.1, slot(i).1)], fill.filled())),
                    )
                    .map_err(e)?;
                    ch.draw_series(shown().map(|(i, b)| gap(lo, i, b.1))).map_err(e)?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reporting::histogram::Percentiles;

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

    /// n bars fill the category axis exactly: n slots of 1, a label at each centre, none in between.
    #[test]
    fn category_axis_has_one_slot_per_bar() {
        for n in [1usize, 2, 5, 12] {
            let axis = category_axis(n);
            assert_eq!(axis.range(), 0.0..n as f64, "{n} bars");
            assert_eq!(category_centres(n).len(), n);
            assert!(category_centres(n).iter().all(|c| *c > 0.0 && *c < n as f64));
        }
        let labels: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        assert_eq!(category_label(&labels, 0.5), "a");
        assert_eq!(category_label(&labels, 2.5), "c");
        assert_eq!(category_label(&labels, 3.0), "");
        assert_eq!(category_label(&labels, -0.5), "");
    }

    /// Sizes of 35..59 MiB: a linear axis from 0 (the old log axis ran to 350 MiB and was labelled only at
    /// 100, 200, 300). Values spanning 10x and more: a log axis with labels inside the data's range.
    #[test]
    fn value_axis_labels_fall_where_the_data_is() {
        match value_axis(&[35.0, 41.0, 47.0, 59.0, 0.0]) {
            ValueAxis::Linear { hi } => assert!(hi > 59.0 && hi < 70.0, "{hi}"),
            other => panic!("{other:?}"),
        }
        match value_axis(&[120.0, 3_000.0, 95_000.0]) {
            ValueAxis::Log { lo, hi, ticks } => {
                assert!(lo < 120.0 && hi > 95_000.0 && hi < 150_000.0, "{lo} {hi}");
                assert!(ticks.len() >= 4 && ticks.len() <= 12, "{ticks:?}");
                assert!(ticks.iter().all(|t| *t >= lo && *t <= hi), "{ticks:?}");
                assert!(ticks.first().unwrap() / lo < 3.0 && hi / ticks.last().unwrap() < 3.0, "{ticks:?}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(value_axis(&[]), ValueAxis::Linear { hi: 1.0 });
        assert_eq!(value_axis(&[0.0, 0.0]), ValueAxis::Linear { hi: 1.0 });
    }

    #[test]
    fn log_ticks_are_round_and_inside_the_range() {
        assert_eq!(log_ticks(80.0, 1200.0), vec![100.0, 200.0, 500.0, 1000.0]);
        // Less than a decade: every integer multiple.
        assert_eq!(log_ticks(28.0, 74.0), vec![30.0, 40.0, 50.0, 60.0, 70.0]);
        // Many decades: powers of 10 only.
        assert_eq!(log_ticks(0.5, 2e6), vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]);
        assert!(log_ticks(0.0, 10.0).is_empty() && log_ticks(5.0, 1.0).is_empty());
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
