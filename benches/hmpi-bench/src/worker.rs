//! The command line of a benchmark's worker ranks: the parent
//! (`hmpi-bench opi|rma|pgas …`) launches the ranks of a job as
//! `hmpi-bench --worker NAME --sizes 8,1024 --reps 5 --out FILE
//! [--quick] [--transport T --label L]`, and each rank reads its job from
//! those arguments here.

use crate::BenchError;

/// What one worker rank measures and where its result lines go.
pub struct Job {
    /// Message sizes in bytes.
    pub sizes: Vec<usize>,
    /// Measured repetitions per point.
    pub reps: usize,
    /// Short loops (a smoke run).
    pub quick: bool,
    /// The file the result lines go to.
    pub out: String,
    /// `hmpi`, or `rsmpi` (feature `mpi`) for an MPI peer.
    pub transport: String,
    /// The backend label of the result lines.
    pub label: String,
}

/// Parses the arguments of worker `name`. `reps` is the default
/// repetition count; with `backend` the job also takes `--transport` and
/// `--label` (both default to it), without them they are errors.
pub fn parse(
    name: &str,
    args: &[String],
    reps: usize,
    backend: Option<&str>,
) -> Result<Job, BenchError> {
    let bad = |m: String| BenchError::Usage(format!("--worker {name}: {m}"));
    let mut job = Job {
        sizes: Vec::new(),
        reps,
        quick: false,
        out: String::new(),
        transport: backend.unwrap_or_default().into(),
        label: backend.unwrap_or_default().into(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| bad(format!("{a} needs a value")))
        };
        match a.as_str() {
            "--sizes" => {
                job.sizes = value()?
                    .split(',')
                    .map(|s| s.parse().map_err(|_| bad(format!("bad size '{s}'"))))
                    .collect::<Result<_, _>>()?
            }
            "--reps" => {
                let v = value()?;
                job.reps = v
                    .parse()
                    .ok()
                    .filter(|&r| r > 0)
                    .ok_or_else(|| bad(format!("bad --reps '{v}'")))?
            }
            "--out" => job.out = value()?,
            "--quick" => job.quick = true,
            "--transport" if backend.is_some() => job.transport = value()?,
            "--label" if backend.is_some() => job.label = value()?,
            other => return Err(bad(format!("unknown argument '{other}'"))),
        }
    }
    if job.sizes.is_empty() || job.out.is_empty() {
        return Err(bad("--sizes and --out are required".into()));
    }
    Ok(job)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn reads_a_full_command_line() {
        let a = args("--sizes 8,1024 --reps 3 --out f --quick --transport rsmpi --label x");
        let j = parse("rma", &a, 5, Some("hmpi")).unwrap();
        assert_eq!(j.sizes, [8, 1024]);
        assert_eq!((j.reps, j.quick, j.out.as_str()), (3, true, "f"));
        assert_eq!((j.transport.as_str(), j.label.as_str()), ("rsmpi", "x"));
    }

    #[test]
    fn defaults_and_refusals() {
        let j = parse("rma", &args("--sizes 8 --out f"), 5, Some("hmpi")).unwrap();
        assert_eq!((j.reps, j.quick), (5, false));
        assert_eq!((j.transport.as_str(), j.label.as_str()), ("hmpi", "hmpi"));
        for bad in [
            "--sizes 8",
            "--out f",
            "--sizes x --out f",
            "--sizes 8 --out f --reps 0",
            "--sizes 8 --out f --reps",
            "--sizes 8 --out f --what",
        ] {
            assert!(parse("rma", &args(bad), 5, Some("hmpi")).is_err(), "{bad}");
        }
        // A worker without MPI peers takes no transport.
        let e = parse("opi", &args("--sizes 8 --out f --transport rsmpi"), 5, None);
        assert!(matches!(e, Err(BenchError::Usage(m)) if m.contains("--worker opi")));
    }
}
