//! Results: samples, the tables printed to stdout and the CSV file.
//!
//! A [`Sample`] is one point of one workload on one backend: the median over
//! the repetitions (what the table and the CSV show) plus the minimum and
//! maximum (kept to show the point's noise in the table). Tables put the
//! backends of a row side by side and add ratios between them, because a
//! number only means something next to its peer from the same run.
//!
//! The CSV's columns are fixed — `workload,backend,threads,size,value,unit`
//! (the median in `value`), then `min,max` over the repetitions — so that
//! plotting scripts can rely on them.
//!
//! # Example
//! ```ignore
//! let s = Sample::from_reps("alloc-free", "glibc", 1, 64, "Mpairs/s", &[9.0, 10.0, 11.0]).unwrap();
//! assert_eq!(s.value, 10.0);
//! let table = render_table(&[s], "alloc-free", &["glibc"], &[]);
//! ```

use crate::stats;
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::Path;

/// The CSV header, exactly.
pub const CSV_HEADER: &str = "workload,backend,threads,size,value,unit,min,max";

/// One measured point: the median over its repetitions.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Workload, e.g. `alloc-free`.
    pub workload: String,
    /// What was measured, e.g. `shmheap`, `glibc`, `hmpi`, `rsmpi`.
    pub backend: String,
    /// Threads (or ranks) taking part.
    pub threads: u32,
    /// Block or message size in bytes.
    pub size: usize,
    /// Median over the repetitions.
    pub value: f64,
    /// Unit of `value`, e.g. `Mpairs/s`.
    pub unit: &'static str,
    min: f64,
    max: f64,
}

impl Sample {
    /// The sample of repetitions `reps` (`None` if there are none).
    pub fn from_reps(
        workload: &str,
        backend: &str,
        threads: u32,
        size: usize,
        unit: &'static str,
        reps: &[f64],
    ) -> Option<Sample> {
        Some(Sample {
            workload: workload.to_owned(),
            backend: backend.to_owned(),
            threads,
            size,
            value: stats::median(reps)?,
            unit,
            min: stats::min(reps)?,
            max: stats::max(reps)?,
        })
    }

    /// Sets the smallest and largest repetition (of several runs merged).
    pub fn set_range(&mut self, min: f64, max: f64) {
        self.min = min;
        self.max = max;
    }

    /// The smallest repetition.
    pub fn min(&self) -> f64 {
        self.min
    }

    /// The largest repetition.
    pub fn max(&self) -> f64 {
        self.max
    }

    /// (max − min) / median over the repetitions: how noisy the point was.
    pub fn spread(&self) -> f64 {
        if self.value > 0.0 {
            (self.max - self.min) / self.value
        } else {
            0.0
        }
    }
}

/// `bytes` as the tables show it: `16`, `512`, `1K`, `64K`, `1M`.
pub fn fmt_size(bytes: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (unit, suffix) in UNITS {
        if bytes >= unit && bytes % unit == 0 {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// A median as the tables show it: two decimals, or three significant
/// digits below 1 (so that small rates do not print as `0.00`).
pub fn fmt_value(v: f64) -> String {
    if v.abs() >= 1.0 || v == 0.0 {
        format!("{v:.2}")
    } else {
        let decimals = (2.0 - v.abs().log10().floor()).clamp(2.0, 12.0) as usize;
        format!("{v:.decimals$}")
    }
}

/// The sample of (`workload`, `backend`, `threads`, `size`), if measured.
pub fn find<'a>(
    samples: &'a [Sample],
    workload: &str,
    backend: &str,
    threads: u32,
    size: usize,
) -> Option<&'a Sample> {
    samples.iter().find(|s| {
        s.workload == workload && s.backend == backend && s.threads == threads && s.size == size
    })
}

/// `num / den` for one row (both medians), if both were measured and the
/// denominator is positive.
pub fn ratio(
    samples: &[Sample],
    workload: &str,
    threads: u32,
    size: usize,
    num: &str,
    den: &str,
) -> Option<f64> {
    let n = find(samples, workload, num, threads, size)?.value;
    let d = find(samples, workload, den, threads, size)?.value;
    (d > 0.0).then(|| n / d)
}

/// Rows of `workload`: its distinct (threads, size) pairs, in order of
/// threads then size.
pub fn rows(samples: &[Sample], workload: &str) -> Vec<(u32, usize)> {
    let mut rows: Vec<(u32, usize)> = samples
        .iter()
        .filter(|s| s.workload == workload)
        .map(|s| (s.threads, s.size))
        .collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

/// Short column name of a backend for ratio headers (`shmheap-xrank` →
/// `xrank`, `mimalloc` → `mi`, others unchanged).
fn short(backend: &str) -> &str {
    match backend {
        "shmheap" => "shm",
        "mimalloc" => "mi",
        other => other.rsplit('-').next().unwrap_or(other),
    }
}

/// A table of `workload`: one row per (threads, size), one column per
/// backend (its median; `-` where not measured), one per ratio
/// `(numerator, denominator)`, and the row's noise: the largest
/// (max − min) / median among its samples.
pub fn render_table(
    samples: &[Sample],
    workload: &str,
    backends: &[&str],
    ratios: &[(&str, &str)],
) -> String {
    let rows = rows(samples, workload);
    let unit = samples
        .iter()
        .find(|s| s.workload == workload)
        .map_or("", |s| s.unit);
    let mut header: Vec<String> = vec!["threads".into(), "size".into()];
    header.extend(backends.iter().map(|b| b.to_string()));
    header.extend(
        ratios
            .iter()
            .map(|(n, d)| format!("{}/{}", short(n), short(d))),
    );
    header.push("noise".into());

    let mut cells: Vec<Vec<String>> = Vec::new();
    for &(threads, size) in &rows {
        let mut row = vec![threads.to_string(), fmt_size(size)];
        let mut noise: f64 = 0.0;
        for b in backends {
            match find(samples, workload, b, threads, size) {
                Some(s) => {
                    noise = noise.max(s.spread());
                    row.push(fmt_value(s.value));
                }
                None => row.push("-".into()),
            }
        }
        for (n, d) in ratios {
            row.push(match ratio(samples, workload, threads, size, n, d) {
                Some(r) => format!("{r:.2}x"),
                None => "-".into(),
            });
        }
        row.push(format!("{:.0}%", noise * 100.0));
        cells.push(row);
    }

    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            cells
                .iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{workload} ({unit}, median of repetitions; noise = (max-min)/median, worst in row)"
    );
    let line = |out: &mut String, row: &[String]| {
        let parts: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, &w)| format!("{c:>w$}"))
            .collect();
        let _ = writeln!(out, "{}", parts.join("  ").trim_end());
    };
    line(&mut out, &header);
    let rule: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
    line(&mut out, &rule);
    for row in &cells {
        line(&mut out, row);
    }
    out
}

/// Quotes a CSV field if it needs it.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Writes `samples` as CSV (header [`CSV_HEADER`]) to `out`.
pub fn write_csv_to(mut out: impl Write, samples: &[Sample]) -> io::Result<()> {
    writeln!(out, "{CSV_HEADER}")?;
    for s in samples {
        writeln!(
            out,
            "{},{},{},{},{:.4},{},{:.4},{:.4}",
            csv_field(&s.workload),
            csv_field(&s.backend),
            s.threads,
            s.size,
            s.value,
            csv_field(s.unit),
            s.min,
            s.max
        )?;
    }
    out.flush()
}

/// Writes `samples` as CSV to the file at `path`.
pub fn write_csv(path: &Path, samples: &[Sample]) -> io::Result<()> {
    let f = std::fs::File::create(path)?;
    write_csv_to(io::BufWriter::new(f), samples)
}

/// One row of a results file read back ([`read_csv`]): the sample and the
/// row's `benchmark` column (empty if the file has none).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The `benchmark` column: which `hmpi-bench` run produced the row
    /// (`p2p`, `opi`, `alloc`).
    pub benchmark: String,
    /// The measured point.
    pub sample: Sample,
}

/// A unit read from a file, as the `&'static str` that [`Sample`] holds:
/// the units this program writes, else the text kept for the process's
/// life (a results file has a handful of units).
fn static_unit(unit: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "us", "ns", "MB/s", "Mmsg/s", "Mpairs/s", "Mfrees/s", "x", "",
    ];
    match KNOWN.iter().find(|k| **k == unit) {
        Some(k) => k,
        None => Box::leak(unit.to_owned().into_boxed_str()),
    }
}

/// Reads a CSV of samples: what `--csv` writes, or a results file that has
/// more columns (`benchmark`, `date`, …) around those. Columns are found by
/// their header names; `min` and `max` may be missing or empty (older
/// files), and then are the median. An error names the line at fault.
pub fn read_csv_from(text: &str) -> Result<Vec<Row>, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty());
    let (_, header) = lines.next().ok_or("empty file: no header line")?;
    let names: Vec<&str> = header.split(',').map(str::trim).collect();
    let col = |name: &str| names.iter().position(|n| *n == name);
    let need = |name: &str| {
        col(name).ok_or_else(|| format!("the header has no column '{name}': {header}"))
    };
    let (w, b, t, sz, v, u) = (
        need("workload")?,
        need("backend")?,
        need("threads")?,
        need("size")?,
        need("value")?,
        need("unit")?,
    );
    let (min, max, bench) = (col("min"), col("max"), col("benchmark"));
    let mut rows = Vec::new();
    for (i, line) in lines {
        let at = |what: &str| format!("line {}: {what}: {line}", i + 1);
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() != names.len() {
            return Err(at(&format!(
                "{} fields, the header has {}",
                f.len(),
                names.len()
            )));
        }
        let num = |c: usize, what: &str| f[c].parse::<f64>().map_err(|_| at(what));
        let value = num(v, "value is not a number")?;
        let bound = |c: Option<usize>, what: &str| match c {
            Some(c) if !f[c].is_empty() => num(c, what),
            _ => Ok(value),
        };
        rows.push(Row {
            benchmark: bench.map_or(String::new(), |c| f[c].to_owned()),
            sample: Sample {
                workload: f[w].to_owned(),
                backend: f[b].to_owned(),
                threads: f[t].parse().map_err(|_| at("threads is not a count"))?,
                size: f[sz].parse().map_err(|_| at("size is not a byte count"))?,
                value,
                unit: static_unit(f[u]),
                min: bound(min, "min is not a number")?,
                max: bound(max, "max is not a number")?,
            },
        });
    }
    Ok(rows)
}

/// Reads the CSV file at `path` (see [`read_csv_from`]).
pub fn read_csv(path: &Path) -> Result<Vec<Row>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    read_csv_from(&text).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(workload: &str, backend: &str, threads: u32, size: usize, v: f64) -> Sample {
        Sample::from_reps(workload, backend, threads, size, "Mpairs/s", &[v]).unwrap()
    }

    #[test]
    fn sizes_print_short() {
        assert_eq!(fmt_size(16), "16");
        assert_eq!(fmt_size(1024), "1K");
        assert_eq!(fmt_size(65536), "64K");
        assert_eq!(fmt_size(1 << 20), "1M");
        assert_eq!(fmt_size(1536), "1536");
    }

    #[test]
    fn values_keep_three_digits() {
        assert_eq!(fmt_value(12742.314), "12742.31");
        assert_eq!(fmt_value(0.15), "0.150");
        assert_eq!(fmt_value(0.004321), "0.00432");
        assert_eq!(fmt_value(0.0), "0.00");
    }

    #[test]
    fn csv_has_the_exact_header() {
        let mut buf = Vec::new();
        write_csv_to(&mut buf, &[s("alloc-free", "glibc", 2, 64, 12.5)]).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some("workload,backend,threads,size,value,unit,min,max")
        );
        assert_eq!(
            lines.next(),
            Some("alloc-free,glibc,2,64,12.5000,Mpairs/s,12.5000,12.5000")
        );
        let mut buf = Vec::new();
        let x = Sample::from_reps("a,b", "c", 1, 8, "us", &[3.0, 1.0, 2.0]).unwrap();
        write_csv_to(&mut buf, &[x]).unwrap();
        let text = String::from_utf8(buf).unwrap();
        assert_eq!(
            text.lines().nth(1),
            Some("\"a,b\",c,1,8,2.0000,us,1.0000,3.0000")
        );
    }

    #[test]
    fn median_min_max() {
        let x = Sample::from_reps("w", "b", 1, 1, "u", &[3.0, 1.0, 2.0]).unwrap();
        assert_eq!(x.value, 2.0);
        assert_eq!(x.spread(), 1.0);
        assert!(Sample::from_reps("w", "b", 1, 1, "u", &[]).is_none());
    }

    #[test]
    fn table_has_ratios_and_gaps() {
        let samples = [
            s("w", "shmheap", 1, 16, 20.0),
            s("w", "glibc", 1, 16, 10.0),
            s("w", "shmheap", 1, 32, 5.0),
        ];
        let t = render_table(
            &samples,
            "w",
            &["shmheap", "glibc"],
            &[("shmheap", "glibc")],
        );
        assert!(t.contains("shm/glibc"), "{t}");
        assert!(t.contains("2.00x"), "{t}");
        let last = t.lines().last().unwrap();
        assert!(last.contains('-'), "{t}");
        assert_eq!(ratio(&samples, "w", 1, 32, "shmheap", "glibc"), None);
    }

    #[test]
    fn csv_reads_back() {
        let samples = [s("w", "shmheap", 1, 16, 20.0), s("w", "glibc", 2, 32, 5.5)];
        let mut out = Vec::new();
        write_csv_to(&mut out, &samples).unwrap();
        let rows = read_csv_from(std::str::from_utf8(&out).unwrap()).unwrap();
        let back: Vec<Sample> = rows.into_iter().map(|r| r.sample).collect();
        assert_eq!(back, samples);
    }

    #[test]
    fn results_files_read_by_column_name() {
        let text = "benchmark,date,workload,backend,threads,size,value,unit,min,max\n\
                    alloc,2026-11-21,alloc-free,glibc,1,16,29.2,Mpairs/s,,\n\
                    p2p,2026-11-25,latency,hmpi,2,8,0.2,us,0.18,0.28\n";
        let rows = read_csv_from(text).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].benchmark, "alloc");
        assert_eq!((rows[0].sample.min(), rows[0].sample.max()), (29.2, 29.2));
        assert_eq!(rows[1].sample.unit, "us");
        assert_eq!((rows[1].sample.size, rows[1].sample.max()), (8, 0.28));
        for bad in [
            "",
            "workload,backend\nw,b\n",
            "workload,backend,threads,size,value,unit\nw,b,1,16\n",
            "workload,backend,threads,size,value,unit\nw,b,one,16,1,us\n",
        ] {
            assert!(read_csv_from(bad).is_err(), "{bad:?}");
        }
    }
}
