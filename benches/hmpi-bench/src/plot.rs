//! `--plot FILE.png`: log-log curves of each measured workload, one panel per
//! workload (latency, bandwidth, …), one line per backend.
//!
//! Drawn with `plotters` into a bitmap and encoded as PNG. Text needs a
//! TrueType font, read at run time so that the build needs no font
//! libraries: `HMPI_BENCH_FONT` names one, else the usual Debian paths are
//! tried (`fonts-dejavu-core`, which `scripts/setup` installs, or
//! Liberation). Size 0 has no place on a logarithmic axis and is left out
//! of the plot (it stays in the table and the CSV). A workload measured as
//! a fraction (the overlap figure of `rma`, which can be 0 or below) is
//! drawn on a linear y axis from 0 (or its lowest point) to 1 (or its
//! highest).
//!
//! # Example
//! ```ignore
//! let s = Sample::from_reps("latency", "hmpi", 2, 8, "us", &[0.2]).unwrap();
//! plot_file(Path::new("/tmp/lat.png"), &[s], &["latency"])?;
//! ```

use crate::report::{fmt_size, Sample};
use plotters::prelude::*;
use plotters::style::register_font;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Pixels per panel.
const PANEL: (u32, u32) = (900, 620);
/// Font files tried in order when `HMPI_BENCH_FONT` is not set.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf",
];
/// The variable naming a font file.
const FONT_VAR: &str = "HMPI_BENCH_FONT";
/// Line colours by backend position.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
];

/// Registers a TrueType font as `sans-serif` once per process.
fn font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let candidates: Vec<PathBuf> = match std::env::var_os(FONT_VAR) {
            Some(p) => vec![PathBuf::from(p)],
            None => FONT_PATHS.iter().map(PathBuf::from).collect(),
        };
        let Some((path, bytes)) = candidates
            .iter()
            .find_map(|p| std::fs::read(p).ok().map(|b| (p.clone(), b)))
        else {
            return Err(format!(
                "--plot needs a TrueType font: none at {} (install fonts-dejavu-core, \
                 which scripts/setup does, or set {FONT_VAR} to a .ttf file)",
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        // The font table wants 'static bytes: one font, kept for the
        // process's life.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a TrueType font", path.display()))
    })
    .clone()
}

/// Backends of `workload` in first-seen order.
fn backends<'a>(samples: &'a [Sample], workload: &str) -> Vec<&'a str> {
    let mut v: Vec<&str> = Vec::new();
    for s in samples.iter().filter(|s| s.workload == workload) {
        if !v.contains(&s.backend.as_str()) {
            v.push(&s.backend);
        }
    }
    v
}

/// The unit of the workloads drawn on a linear y axis.
const LINEAR_UNIT: &str = "fraction";

/// Whether `workload` is drawn on a linear y axis.
fn linear(samples: &[Sample], workload: &str) -> bool {
    samples
        .iter()
        .any(|s| s.workload == workload && s.unit == LINEAR_UNIT)
}

/// The (size, median) points of one curve, sizes above 0, in size order
/// (values above 0 too, unless the axis is linear).
fn curve(samples: &[Sample], workload: &str, backend: &str) -> Vec<(f64, f64)> {
    let lin = linear(samples, workload);
    let mut v: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.workload == workload && s.backend == backend && s.size > 0)
        .filter(|s| s.value.is_finite() && (lin || s.value > 0.0))
        .map(|s| (s.size as f64, s.value))
        .collect();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    v
}

/// Axis range covering `xs` on a log scale, widened a little.
fn span(xs: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    let (lo, hi) = xs.fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
        (lo.min(x), hi.max(x))
    });
    if lo.is_finite() && hi > 0.0 {
        Some((lo / 1.3, hi * 1.3))
    } else {
        None
    }
}

/// Writes a PNG with one panel per workload of `workloads` that has
/// points. An error if none has (or the font or file is unusable).
pub fn plot_file(path: &Path, samples: &[Sample], workloads: &[&str]) -> Result<(), String> {
    let shown: Vec<&str> = workloads
        .iter()
        .copied()
        .filter(|w| {
            backends(samples, w)
                .iter()
                .any(|b| !curve(samples, w, b).is_empty())
        })
        .collect();
    if shown.is_empty() {
        return Err(format!(
            "--plot {}: nothing to plot (no sizes above 0 measured)",
            path.display()
        ));
    }
    font()?;
    let cols = if shown.len() > 1 { 2 } else { 1 };
    let rows = shown.len().div_ceil(cols);
    let size = (PANEL.0 * cols as u32, PANEL.1 * rows as u32);
    let draw_err = |e: &dyn std::fmt::Display| format!("--plot {}: {e}", path.display());
    {
        let root = BitMapBackend::new(path, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| draw_err(&e))?;
        let panels = root.split_evenly((rows, cols));
        for (w, area) in shown.iter().zip(panels.iter()) {
            panel(area, samples, w).map_err(|e| draw_err(&e))?;
        }
        root.present().map_err(|e| draw_err(&e))?;
    }
    Ok(())
}

/// One workload's panel.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    samples: &[Sample],
    workload: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    if linear(samples, workload) {
        return linear_panel(area, samples, workload);
    }
    let names = backends(samples, workload);
    let curves: Vec<(&str, Vec<(f64, f64)>)> = names
        .iter()
        .map(|b| (*b, curve(samples, workload, b)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    let all = || curves.iter().flat_map(|(_, c)| c.iter());
    let (Some(xr), Some(yr)) = (span(all().map(|p| p.0)), span(all().map(|p| p.1))) else {
        return Ok(());
    };
    let unit = samples
        .iter()
        .find(|s| s.workload == workload)
        .map_or("", |s| s.unit);
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{workload} ({unit}, median)"), ("sans-serif", 28))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(86)
        .build_cartesian_2d((xr.0..xr.1).log_scale().base(2.0), (yr.0..yr.1).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("size (bytes)")
        .y_desc(unit)
        .x_labels(12)
        .y_labels(10)
        .x_label_formatter(&|x| fmt_size(x.round() as usize))
        .y_label_formatter(&|y| {
            if *y >= 100.0 {
                format!("{y:.0}")
            } else if *y >= 1.0 {
                format!("{y:.1}")
            } else {
                format!("{y:.2}")
            }
        })
        .label_style(("sans-serif", 18))
        .axis_desc_style(("sans-serif", 20))
        .draw()?;
    for (i, (name, pts)) in curves.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(3)))?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3))
            });
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, colour.filled())))?;
    }
    // The legend goes where the curves are not: the lower left when they
    // fall (message rate), the upper left when they rise.
    let falling = curves
        .first()
        .and_then(|(_, c)| Some(c.first()?.1 > c.last()?.1))
        .unwrap_or(false);
    chart
        .configure_series_labels()
        .position(if falling {
            SeriesLabelPosition::LowerLeft
        } else {
            SeriesLabelPosition::UpperLeft
        })
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 20))
        .draw()?;
    Ok(())
}

/// A panel with a linear y axis (a fraction: 0 to 1, widened to the
/// points outside).
fn linear_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    samples: &[Sample],
    workload: &str,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let curves: Vec<(&str, Vec<(f64, f64)>)> = backends(samples, workload)
        .iter()
        .map(|b| (*b, curve(samples, workload, b)))
        .filter(|(_, c)| !c.is_empty())
        .collect();
    let all = || curves.iter().flat_map(|(_, c)| c.iter());
    let Some(xr) = span(all().map(|p| p.0)) else {
        return Ok(());
    };
    let lo = all().map(|p| p.1).fold(0.0f64, f64::min) - 0.05;
    let hi = all().map(|p| p.1).fold(1.0f64, f64::max) + 0.05;
    let mut chart = ChartBuilder::on(area)
        .caption(format!("{workload} (median)"), ("sans-serif", 28))
        .margin(16)
        .x_label_area_size(56)
        .y_label_area_size(86)
        .build_cartesian_2d((xr.0..xr.1).log_scale().base(2.0), lo..hi)?;
    chart
        .configure_mesh()
        .x_desc("size (bytes)")
        .y_desc(LINEAR_UNIT)
        .x_labels(12)
        .y_labels(10)
        .x_label_formatter(&|x| fmt_size(x.round() as usize))
        .y_label_formatter(&|y| format!("{y:.1}"))
        .label_style(("sans-serif", 18))
        .axis_desc_style(("sans-serif", 20))
        .draw()?;
    for (i, (name, pts)) in curves.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(3)))?
            .label(*name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 24, y)], colour.stroke_width(3))
            });
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, colour.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 20))
        .draw()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(w: &str, b: &str, size: usize, v: f64) -> Sample {
        Sample::from_reps(w, b, 2, size, "us", &[v]).unwrap()
    }

    #[test]
    fn curves_skip_size_zero_and_sort() {
        let samples = [
            s("latency", "hmpi", 64, 0.3),
            s("latency", "hmpi", 0, 0.1),
            s("latency", "hmpi", 8, 0.2),
            s("latency", "rsmpi-mpich", 8, 0.4),
        ];
        assert_eq!(
            curve(&samples, "latency", "hmpi"),
            vec![(8.0, 0.2), (64.0, 0.3)]
        );
        assert_eq!(backends(&samples, "latency"), vec!["hmpi", "rsmpi-mpich"]);
        assert_eq!(span([2.0, 8.0].into_iter()), Some((2.0 / 1.3, 8.0 * 1.3)));
        assert_eq!(span(std::iter::empty()), None);
    }

    #[test]
    fn writes_a_png() {
        let mut samples = Vec::new();
        for k in 0..12 {
            let size = 1usize << (2 * k);
            samples.push(s("latency", "hmpi", size, 0.1 + size as f64 / 1e4));
            samples.push(s("latency", "rsmpi-openmpi", size, 0.2 + size as f64 / 5e3));
            let mut b = s("bw", "hmpi", size, 1.0 + size as f64 / 100.0);
            b.unit = "MB/s";
            samples.push(b);
        }
        let dir = std::env::temp_dir().join(format!("hmpi-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.png");
        plot_file(&path, &samples, &["latency", "bw", "bibw"]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        // Two panels side by side: 1800 × 620 (IHDR width and height).
        let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
        let h = u32::from_be_bytes(bytes[20..24].try_into().unwrap());
        assert_eq!((w, h), (2 * PANEL.0, PANEL.1));
        // Nothing to plot is an error, not an empty picture.
        let only_zero = [s("latency", "hmpi", 0, 0.1)];
        // A fraction keeps its points at and below 0, on a linear axis.
        let mut f: Vec<Sample> = [(4096, -0.1), (1 << 20, 0.0), (1 << 22, 0.9)]
            .iter()
            .map(|&(size, v)| s("put-overlap", "hmpi", size, v))
            .collect();
        for x in &mut f {
            x.unit = LINEAR_UNIT;
        }
        assert!(linear(&f, "put-overlap") && !linear(&samples, "latency"));
        assert_eq!(curve(&f, "put-overlap", "hmpi").len(), 3);
        plot_file(&dir.join("f.png"), &f, &["put-overlap"]).unwrap();
        assert!(plot_file(&dir.join("q.png"), &only_zero, &["latency"]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
