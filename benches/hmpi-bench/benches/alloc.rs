//! In-process allocator micro-benchmarks: [`shmheap::ShmHeap`] against the
//! system allocator, for a small (64 B) and a large (64 KiB) block.
//!
//! * `pair`: one allocation and its free (the thread cache's LIFO fast path);
//! * `batch64`: 64 allocations, then 64 frees in allocation order (the
//!   pattern of `hmpi-bench alloc`'s `alloc-free`).
//!
//! Run with `cargo bench -p hmpi-bench --bench alloc`. The multi-process figures (two
//! threads, cross-rank frees, mimalloc) come from `hmpi-bench alloc`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hmpi::ShmHeap;
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

const BATCH: usize = 64;

/// One alloc+free pair through `a`.
fn pair<A: GlobalAlloc>(a: &A, layout: Layout) {
    // SAFETY: the layout has a non-zero size.
    let p = black_box(unsafe { a.alloc(layout) });
    assert!(!p.is_null(), "allocation failed");
    // SAFETY: `p` is a fresh block of at least one byte, freed once with
    // the layout it was allocated with.
    unsafe {
        p.write_volatile(1);
        a.dealloc(p, layout);
    }
}

/// `BATCH` allocations, then their frees in allocation order.
fn batch<A: GlobalAlloc>(a: &A, layout: Layout) {
    let mut blocks = [std::ptr::null_mut::<u8>(); BATCH];
    for b in &mut blocks {
        // SAFETY: the layout has a non-zero size.
        let p = black_box(unsafe { a.alloc(layout) });
        assert!(!p.is_null(), "allocation failed");
        // SAFETY: `p` is a fresh block of at least one byte.
        unsafe { p.write_volatile(1) };
        *b = p;
    }
    for &p in &blocks {
        // SAFETY: each block was allocated above with `layout`, freed once.
        unsafe { a.dealloc(p, layout) };
    }
}

fn alloc_free(c: &mut Criterion) {
    // Without a launcher this creates a private node heap of one rank.
    if let Err(e) = hmpi::attach_from_env() {
        eprintln!("cannot attach to a node heap: {e}");
        std::process::exit(1);
    }
    let shm = ShmHeap::new();
    for size in [64usize, 64 << 10] {
        let layout = Layout::from_size_align(size, 16).expect("valid layout");
        let mut g = c.benchmark_group(format!("alloc-free/{size}B"));
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new("pair", "shmheap"), |b| {
            b.iter(|| pair(&shm, layout))
        });
        g.bench_function(BenchmarkId::new("pair", "system"), |b| {
            b.iter(|| pair(&System, layout))
        });
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function(BenchmarkId::new("batch64", "shmheap"), |b| {
            b.iter(|| batch(&shm, layout))
        });
        g.bench_function(BenchmarkId::new("batch64", "system"), |b| {
            b.iter(|| batch(&System, layout))
        });
        g.finish();
    }
}

criterion_group!(benches, alloc_free);
criterion_main!(benches);
