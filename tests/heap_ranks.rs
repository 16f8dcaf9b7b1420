//! The node heap across real ranks started by the launcher.
//!
//! This test binary has its own small harness (`harness = false`): run
//! plainly, it runs the tests below one after another; each launches ranks
//! that re-execute this binary with `HMPI_TEST_ROLE` naming the rank side to
//! run. A rank runs on the main thread with no test harness threads beside
//! it, so that its arena's usage can be compared byte for byte.

use hmpi_core::launch::{rank_tests, JobReport};
use proptest::prelude::*;
use shmheap::segment::{SegmentFile, SegmentSpec};
use shmheap::{Error, Limit, ShmHeap};
use std::alloc::{GlobalAlloc, Layout};
use std::path::PathBuf;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

const PLAN: &str = "HMPI_TEST_PLAN";
/// Registry slot where each rank publishes its table of blocks.
const TABLE_SLOT: usize = 40;

/// The rank sides, by role name.
const ROLES: &[(&str, fn())] = &[
    ("cross-free", cross_free_rank),
    ("segment-unlinked", segment_unlinked_rank),
    ("rank-killed", rank_killed_rank),
    ("exhausted-arena", exhausted_arena_rank),
    ("exhausted-global", exhausted_global_rank),
    ("full-shm", full_shm_rank),
];

fn main() {
    rank_tests::main(
        |role| {
            ROLES
                .iter()
                .find(|(name, _)| *name == role)
                .map(|(_, body)| body())
        },
        TESTS,
    );
}

fn assert_success(report: &JobReport) {
    assert!(
        report.success(),
        "job failed:\n{}",
        rank_tests::describe(report)
    );
}

/// The tests the parent runs.
const TESTS: &[(&str, fn())] = &[
    (
        "cross_rank_frees_return_every_byte",
        cross_rank_frees_return_every_byte,
    ),
    (
        "more_ranks_than_cores_free_each_others_blocks",
        more_ranks_than_cores_free_each_others_blocks,
    ),
    (
        "segment_is_unlinked_once_all_attached_and_gone_after_the_job",
        segment_is_unlinked_once_all_attached_and_gone_after_the_job,
    ),
    (
        "segment_is_removed_when_a_rank_is_killed",
        segment_is_removed_when_a_rank_is_killed,
    ),
    (
        "exhausted_arena_is_an_error_and_recovers",
        exhausted_arena_is_an_error_and_recovers,
    ),
    (
        "exhaustion_through_the_global_allocator_names_the_limit",
        exhaustion_through_the_global_allocator_names_the_limit,
    ),
    (
        "full_shm_filesystem_is_an_error_not_a_sigbus",
        full_shm_filesystem_is_an_error_not_a_sigbus,
    ),
    (
        "base_address_clash_is_a_clear_error",
        base_address_clash_is_a_clear_error,
    ),
    (
        "segment_is_private_to_its_user",
        segment_is_private_to_its_user,
    ),
];

/// A value every word of block (`owner`, `index`) is filled with.
fn pattern(owner: u32, index: usize, word: usize) -> u64 {
    let x = ((owner as u64) << 48) ^ ((index as u64) << 24) ^ word as u64;
    x.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

fn fill(p: *mut u8, size: usize, owner: u32, index: usize) {
    for w in 0..size / 8 {
        // SAFETY: the block has `size` bytes and 8-byte alignment.
        unsafe { (p as *mut u64).add(w).write(pattern(owner, index, w)) };
    }
    for b in size / 8 * 8..size {
        // SAFETY: within the block.
        unsafe { p.add(b).write(owner as u8 ^ index as u8) };
    }
}

fn verify(p: *const u8, size: usize, owner: u32, index: usize) {
    for w in 0..size / 8 {
        // SAFETY: the block has `size` bytes and 8-byte alignment.
        let v = unsafe { (p as *const u64).add(w).read() };
        assert_eq!(
            v,
            pattern(owner, index, w),
            "block {index} of rank {owner}, word {w}"
        );
    }
    for b in size / 8 * 8..size {
        // SAFETY: within the block.
        let v = unsafe { p.add(b).read() };
        assert_eq!(v, owner as u8 ^ index as u8);
    }
}

/// One block of the plan: its owner (allocating rank), size, the rank that
/// frees it, and a key that orders the freer's frees.
#[derive(Debug, Clone)]
struct Block {
    owner: u32,
    size: usize,
    freer: u32,
    key: u32,
}

fn encode(ranks: u32, blocks: &[Block]) -> String {
    let mut s = format!("{ranks}|");
    for b in blocks {
        s += &format!("{},{},{},{};", b.owner, b.size, b.freer, b.key);
    }
    s
}

fn decode(s: &str) -> (u32, Vec<Block>) {
    let (ranks, rest) = s.split_once('|').expect("plan");
    let blocks = rest
        .split(';')
        .filter(|x| !x.is_empty())
        .map(|x| {
            let v: Vec<usize> = x.split(',').map(|n| n.parse().expect("number")).collect();
            Block {
                owner: v[0] as u32,
                size: v[1],
                freer: v[2] as u32,
                key: v[3] as u32,
            }
        })
        .collect();
    (ranks.parse().expect("ranks"), blocks)
}

fn plan_strategy(ranks: u32, max_blocks: usize) -> impl Strategy<Value = Vec<Block>> {
    let size = prop_oneof![
        6 => 1usize..512,
        3 => 512usize..(64 << 10),
        1 => (64usize << 10)..(3 << 20),
    ];
    proptest::collection::vec((0..ranks, size, 0..ranks, any::<u32>()), 1..max_blocks).prop_map(
        |v| {
            v.into_iter()
                .map(|(owner, size, freer, key)| Block {
                    owner,
                    size,
                    freer,
                    key,
                })
                .collect()
        },
    )
}

/// The rank side of the cross-free test.
fn cross_free_rank() {
    let seg = shmheap::attach_from_env().expect("attach");
    let me = seg.local_rank();
    let (ranks, plan) = decode(&std::env::var(PLAN).expect("plan"));
    assert_eq!(ranks, seg.ranks());
    // Indices of my blocks, and of the blocks I free, in key order.
    let mine: Vec<usize> = (0..plan.len()).filter(|&i| plan[i].owner == me).collect();
    let mut to_free: Vec<usize> = (0..plan.len()).filter(|&i| plan[i].freer == me).collect();
    to_free.sort_by_key(|&i| (plan[i].key, i));

    shmheap::flush_thread_cache();
    let baseline = shmheap::local_stats().expect("stats").in_use_bytes();

    // Allocate and fill my blocks; publish a table of their addresses,
    // itself in the heap: [count, (plan index, address)…].
    let table = {
        let layout = Layout::array::<u64>(1 + 2 * mine.len()).unwrap();
        // SAFETY: non-zero size.
        let t = unsafe { ALLOC.alloc(layout) } as *mut u64;
        // SAFETY: the table has 1 + 2 * len words.
        unsafe { t.write(mine.len() as u64) };
        for (k, &i) in mine.iter().enumerate() {
            let layout = Layout::from_size_align(plan[i].size, 8).unwrap();
            // SAFETY: non-zero size.
            let p = unsafe { ALLOC.alloc(layout) };
            assert!(shmheap::is_shared(p));
            assert_eq!(shmheap::owner_of(p), Some(me));
            fill(p, plan[i].size, me, i);
            // SAFETY: within the table.
            unsafe {
                t.add(1 + 2 * k).write(i as u64);
                t.add(2 + 2 * k).write(p as u64);
            }
        }
        seg.publish(TABLE_SLOT, t as u64);
        (t, layout)
    };
    seg.barrier();

    // Read every table once, then free my share in my order.
    let mut addr = vec![0usize; plan.len()];
    for r in 0..ranks {
        let t = seg.wait_lookup(r, TABLE_SLOT) as *const u64;
        assert_eq!(shmheap::owner_of(t), Some(r));
        // SAFETY: rank r's table is complete (published before the
        // barrier) and stays alive until the second barrier.
        let n = unsafe { t.read() } as usize;
        for k in 0..n {
            // SAFETY: as above, within the table.
            let (i, p) = unsafe {
                (
                    t.add(1 + 2 * k).read() as usize,
                    t.add(2 + 2 * k).read() as usize,
                )
            };
            addr[i] = p;
        }
    }
    for &i in &to_free {
        let b = &plan[i];
        verify(addr[i] as *const u8, b.size, b.owner, i);
        let layout = Layout::from_size_align(b.size, 8).unwrap();
        // SAFETY: block i was allocated by its owner with this layout and
        // the plan gives it to exactly one freer (this rank).
        unsafe { ALLOC.dealloc(addr[i] as *mut u8, layout) };
    }
    // Only what was allocated after the baseline may be freed before the
    // final count (`mine`, `to_free` and `plan` predate it).
    drop(addr);
    seg.barrier();
    // SAFETY: every rank has finished reading the table (second barrier).
    unsafe { ALLOC.dealloc(table.0 as *mut u8, table.1) };

    shmheap::flush_thread_cache();
    let after = shmheap::local_stats().expect("stats");
    assert_eq!(after.pending_remote_frees, 0);
    assert_eq!(
        after.in_use_bytes(),
        baseline,
        "rank {me}: arena usage back to its baseline: {after:?}"
    );
    seg.barrier();
}

fn run_cross_free(ranks: u32, blocks: Vec<Block>) {
    let report = rank_tests::launch("cross-free", ranks, &[(PLAN, encode(ranks, &blocks))]);
    assert_success(&report);
}

fn cross_rank_frees_return_every_byte() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 12,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let strategy = (2u32..=5).prop_flat_map(|ranks| (Just(ranks), plan_strategy(ranks, 120)));
    runner
        .run(&strategy, |(ranks, blocks)| {
            run_cross_free(ranks, blocks);
            Ok(())
        })
        .unwrap();
}

fn more_ranks_than_cores_free_each_others_blocks() {
    let ranks = 2 * std::thread::available_parallelism().map_or(2, |n| n.get() as u32) + 1;
    let blocks: Vec<Block> = (0..400u32)
        .map(|i| Block {
            owner: i % ranks,
            size: 1 + (i as usize * 7919) % 20_000,
            freer: (i * 7 + 3) % ranks,
            key: i.wrapping_mul(2_654_435_761),
        })
        .collect();
    run_cross_free(ranks, blocks);
}

/// The segment path the job's ranks printed (every rank prints the same
/// one; any rank's will do, since a rank may be killed before it prints).
fn segment_path_of(report: &JobReport) -> PathBuf {
    report
        .ranks
        .iter()
        .find_map(|r| {
            String::from_utf8_lossy(&r.stdout)
                .lines()
                .find_map(|l| l.strip_prefix("segment=").map(PathBuf::from))
        })
        .unwrap_or_else(|| panic!("no segment line:\n{}", rank_tests::describe(report)))
}

/// Checks that ranks got the launcher's descriptor (the segment never has
/// a name) and that no file of the job is in the segment directory.
fn assert_no_segment_file(report: &JobReport) {
    let path = segment_path_of(report);
    assert!(path.starts_with("/proc/self/fd/"), "{path:?}");
    let dir = std::env::var_os(shmheap::env::SHM_DIR).unwrap_or_else(|| "/dev/shm".into());
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|name| name.contains(&report.job))
        .collect();
    assert!(left.is_empty(), "segment files left behind: {left:?}");
}

fn segment_unlinked_rank() {
    let path = std::env::var(shmheap::env::SHM_NAME).unwrap();
    let seg = shmheap::attach_from_env().unwrap();
    println!("segment={path}");
    seg.barrier();
    assert!(seg.is_unlinked());
    assert!(
        path.starts_with("/proc/self/fd/"),
        "the inherited descriptor, not a name: {path}"
    );
}

fn segment_is_unlinked_once_all_attached_and_gone_after_the_job() {
    let report = rank_tests::launch("segment-unlinked", 3, &[]);
    assert_success(&report);
    assert_no_segment_file(&report);
}

fn rank_killed_rank() {
    let path = std::env::var(shmheap::env::SHM_NAME).unwrap();
    println!("segment={path}");
    if std::env::var("HMPI_RANK").unwrap() == "1" {
        // Die before attaching.
        // SAFETY: raising a signal at ourselves.
        unsafe { libc::raise(libc::SIGKILL) };
    }
    let seg = shmheap::attach_from_env().unwrap();
    seg.barrier(); // never completes: rank 1 is dead
}

fn segment_is_removed_when_a_rank_is_killed() {
    let report = rank_tests::launch("rank-killed", 2, &[]);
    assert!(!report.success(), "{}", rank_tests::describe(&report));
    assert_no_segment_file(&report);
}

fn exhausted_arena_rank() {
    {
        shmheap::attach_from_env().unwrap();
        let heap = ShmHeap::new();
        let big = Layout::from_size_align(8 << 20, 8).unwrap();
        match heap.try_alloc(big) {
            Err(e @ Error::Exhausted(_)) => {
                let msg = e.to_string();
                assert!(msg.contains("HMPI_HEAP_PER_RANK"), "{msg}");
                let Error::Exhausted(x) = e else {
                    unreachable!()
                };
                assert!(matches!(x.limit, Limit::ArenaSize(_)));
            }
            other => panic!("expected exhaustion, got {other:?}"),
        }
        // Fill the arena with 64 KiB blocks, free them, fill again: the
        // same number fits (nothing leaked).
        let layout = Layout::from_size_align(64 << 10, 8).unwrap();
        let mut counts = Vec::new();
        for _ in 0..3 {
            let mut held = Vec::with_capacity(128);
            while let Ok(p) = heap.try_alloc(layout) {
                held.push(p);
            }
            counts.push(held.len());
            for p in held {
                // SAFETY: allocated above with this layout.
                unsafe { heap.dealloc(p.as_ptr(), layout) };
            }
            shmheap::flush_thread_cache();
        }
        assert!(
            counts[0] > 30,
            "a 4 MiB arena holds more than 30 blocks of 64 KiB: {counts:?}"
        );
        assert!(counts.iter().all(|&c| c == counts[0]), "{counts:?}");
    }
}

fn exhausted_arena_is_an_error_and_recovers() {
    let report = rank_tests::launch("exhausted-arena", 1, &[("HMPI_HEAP_PER_RANK", "4M".into())]);
    assert_success(&report);
}

fn exhausted_global_rank() {
    shmheap::attach_from_env().unwrap();
    let v = vec![1u8; 64 << 20];
    println!("unexpected: {}", v.len());
}

fn exhaustion_through_the_global_allocator_names_the_limit() {
    let report = rank_tests::launch(
        "exhausted-global",
        1,
        &[("HMPI_HEAP_PER_RANK", "4M".into())],
    );
    assert!(!report.success());
    let err = String::from_utf8_lossy(&report.ranks[0].stderr);
    assert!(
        err.contains("exhausted") && err.contains("HMPI_HEAP_PER_RANK"),
        "{}",
        rank_tests::describe(&report)
    );
}

fn full_shm_rank() {
    {
        shmheap::attach_from_env().unwrap();
        let heap = ShmHeap::new();
        let small = Layout::from_size_align(1 << 20, 8).unwrap();
        let p = heap
            .try_alloc(small)
            .expect("1 MiB fits in an 8 MiB file system");
        // SAFETY: the block has 1 MiB; writing proves its backing is real.
        unsafe { std::ptr::write_bytes(p.as_ptr(), 1, 1 << 20) };
        let big = Layout::from_size_align(32 << 20, 8).unwrap();
        match heap.try_alloc(big) {
            Err(Error::Exhausted(x)) => {
                assert_eq!(x.limit, Limit::NoSpace);
                assert!(Error::Exhausted(x).to_string().contains("/dev/shm"));
            }
            other => panic!("expected ENOSPC exhaustion, got {other:?}"),
        }
        // SAFETY: allocated above.
        unsafe { heap.dealloc(p.as_ptr(), small) };
    }
}

fn full_shm_filesystem_is_an_error_not_a_sigbus() {
    let dir = std::env::temp_dir().join(format!("hmpi-small-shm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=8m", "hmpi-test"])
        .arg(&dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("skipped: cannot mount a small tmpfs here (needs root)");
        let _ = std::fs::remove_dir(&dir);
        return;
    }
    let report = rank_tests::launch(
        "full-shm",
        1,
        &[
            ("HMPI_SHM_DIR", dir.display().to_string()),
            ("HMPI_HEAP_PER_RANK", "1G".into()),
        ],
    );
    let _ = std::process::Command::new("umount").arg(&dir).status();
    let _ = std::fs::remove_dir(&dir);
    assert_success(&report);
}

fn base_address_clash_is_a_clear_error() {
    let base = 0x3000_0000_0000usize;
    let spec = SegmentSpec {
        base,
        arena_len: 16 << 20,
        ..SegmentSpec::default()
    };
    let file = SegmentFile::create(&spec, "clash").unwrap();
    // Occupy the base address first.
    // SAFETY: an anonymous private mapping at an address nobody uses
    // (MAP_FIXED_NOREPLACE refuses to replace anything).
    let m = unsafe {
        libc::mmap(
            base as *mut libc::c_void,
            1 << 20,
            libc::PROT_READ,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    assert_eq!(m as usize, base);
    let err = shmheap::attach(file.path(), 0, 1).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::AddressInUse { .. }), "{err:?}");
    assert!(
        msg.contains("0x300000000000") && msg.contains("HMPI_SHM_BASE"),
        "{msg}"
    );
    // SAFETY: unmapping our own mapping.
    unsafe { libc::munmap(m, 1 << 20) };
}

fn segment_is_private_to_its_user() {
    use std::os::unix::fs::PermissionsExt;
    let file = SegmentFile::create(&SegmentSpec::default(), "perm").unwrap();
    let mode = std::fs::metadata(file.path()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } != 0 {
        eprintln!("not root: cannot switch to a second user; checked the mode only");
        return;
    }
    let path = std::ffi::CString::new(file.path().as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: the child only makes async-signal-safe calls (setgid, setuid,
    // open, _exit) before exiting.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: as above; `path` was prepared before the fork.
        unsafe {
            if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                libc::_exit(2);
            }
            let fd = libc::open(path.as_ptr(), libc::O_RDWR);
            let code = if fd < 0 && *libc::__errno_location() == libc::EACCES {
                0
            } else {
                1
            };
            libc::_exit(code);
        }
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status));
    assert_eq!(libc::WEXITSTATUS(status), 0, "another user must get EACCES");
}
