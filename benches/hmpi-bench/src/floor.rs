//! The machine's cache-line floor: what one message between the two
//! cores the ranks run on costs at the least.
//!
//! Two threads, pinned to the first two CPUs this process may use (the
//! CPUs the launcher binds ranks 0 and 1 to), ping-pong two flags, each in
//! a cache line of its own: one writes its flag and waits for the other's
//! answer. Half the round trip is the time a cache line written on one
//! core takes to be read on the other — the floor under any message
//! latency between the ranks. On the 2-vCPU machines of the CI kind it
//! changes by a factor of several between stretches of minutes, so
//! `compare` and `opi` measure it before and after their runs and print
//! it with the results.

use hmpi::hmpi_core::launch::allowed_cpus;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::Instant;

/// Round trips per repetition.
const ROUND_TRIPS: u64 = 100_000;
/// Repetitions (median reported).
const REPS: usize = 5;

#[repr(C, align(64))]
struct Line(AtomicU64);

fn pin(cpu: usize) {
    // SAFETY: an all-zero cpu_set_t is the empty set; CPU_SET writes
    // inside it (`cpu` below CPU_SETSIZE, as `allowed_cpus` returns).
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed. A failure
    // leaves the thread unpinned (the measurement is then a little noisier,
    // not wrong).
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
}

/// The floor in nanoseconds one way (median of the repetitions) and the
/// two CPUs it was measured between; `None` with fewer than two CPUs.
pub fn measure() -> Option<(f64, usize, usize)> {
    measure_with(ROUND_TRIPS, REPS)
}

fn measure_with(round_trips: u64, reps: usize) -> Option<(f64, usize, usize)> {
    let cpus = allowed_cpus();
    let (&a, &b) = (cpus.first()?, cpus.get(1)?);
    let ping = Line(AtomicU64::new(0));
    let pong = Line(AtomicU64::new(0));
    let start = Barrier::new(2);
    // Two threads of their own: the calling thread's affinity (which the
    // launcher reads to bind ranks) stays as it is.
    let mut ns = std::thread::scope(|s| {
        s.spawn(|| {
            pin(b);
            start.wait();
            for i in 1..=round_trips * reps as u64 {
                // Acquire/Release: each side sees the other's store before
                // it answers; the values order the round trips.
                while ping.0.load(Ordering::Acquire) != i {}
                pong.0.store(i, Ordering::Release);
            }
        });
        s.spawn(|| {
            pin(a);
            start.wait();
            let mut ns = Vec::with_capacity(reps);
            let mut i = 0;
            for _ in 0..reps {
                let t = Instant::now();
                for _ in 0..round_trips {
                    i += 1;
                    ping.0.store(i, Ordering::Release);
                    while pong.0.load(Ordering::Acquire) != i {}
                }
                ns.push(t.elapsed().as_nanos() as f64 / (2 * round_trips) as f64);
            }
            ns
        })
        .join()
        .expect("the floor's timing thread does not panic")
    });
    ns.sort_by(f64::total_cmp);
    Some((ns[reps / 2], a, b))
}

/// A line for the report: the floor before and after a run.
pub fn line(before: Option<(f64, usize, usize)>, after: Option<(f64, usize, usize)>) -> String {
    match (before, after) {
        (Some((x, a, b)), Some((y, _, _))) => format!(
            "cache-line floor (a flag ping-pong between CPUs {a} and {b}): {x:.0} ns one way before, {y:.0} ns after"
        ),
        _ => "cache-line floor: not measured (fewer than two CPUs)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn floor_is_measured_without_pinning_the_caller() {
        let before = hmpi::hmpi_core::launch::allowed_cpus();
        // A few round trips (the test may share the cores with others).
        if let Some((ns, a, b)) = super::measure_with(200, 3) {
            assert!(ns > 0.0 && a != b, "{ns} {a} {b}");
        }
        assert_eq!(hmpi::hmpi_core::launch::allowed_cpus(), before);
    }
}
