//! Ranks share their heap: each rank fills a vector in its own arena, its
//! right-hand neighbour reads it in place (no copy, no message) and frees
//! it, and the memory goes back to the rank that allocated it.
//!
//! Run: `cargo build --example heap_demo -p hmpi -p hmpi-core --bin hmpirun &&
//! target/debug/hmpirun -n 4 target/debug/examples/heap_demo`

use hmpi::ShmHeap;
use std::time::Instant;

#[global_allocator]
static ALLOC: ShmHeap = ShmHeap::new();

/// Registry slot where each rank publishes its vector's address and length.
const SLOT_PTR: usize = 32;
const SLOT_LEN: usize = 33;

fn main() {
    if let Err(e) = run() {
        eprintln!("heap_demo: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), hmpi::shmheap::Error> {
    let seg = hmpi::shmheap::attach_from_env()?;
    let (me, n) = (seg.local_rank(), seg.ranks());
    let left = (me + n - 1) % n;
    println!(
        "rank {me}/{n}: node heap mapped at {:#x}, {} GiB of address space \
         (one arena per rank, HMPI_HEAP_PER_RANK each; only pages used are backed)",
        seg.base(),
        seg.len() >> 30
    );
    hmpi::shmheap::flush_thread_cache();
    let baseline = hmpi::shmheap::local_stats().map_or(0, |s| s.in_use_bytes());

    // 1. Fill 8 MiB of u64 in my own arena and publish where it is.
    let len = 1 << 20;
    let data: Vec<u64> = (0..len as u64).map(|i| i * (me as u64 + 1)).collect();
    assert_eq!(hmpi::shmheap::owner_of(data.as_ptr()), Some(me));
    let mut data = std::mem::ManuallyDrop::new(data);
    seg.publish(SLOT_PTR, data.as_mut_ptr() as u64);
    seg.publish(SLOT_LEN, len as u64);
    seg.barrier();

    // 2. Read my left neighbour's vector where it lies, then free it.
    let ptr = seg.wait_lookup(left, SLOT_PTR) as *mut u64;
    let nlen = seg.wait_lookup(left, SLOT_LEN) as usize;
    let t = Instant::now();
    // SAFETY: rank `left` published a live Vec<u64> of `nlen` elements with
    // capacity `nlen`, allocated by ShmHeap, and hands it to this rank (it
    // never touches it again).
    let theirs = unsafe { Vec::from_raw_parts(ptr, nlen, nlen) };
    let sum: u64 = theirs.iter().sum();
    let elapsed = t.elapsed();
    let expect = (left as u64 + 1) * (nlen as u64 * (nlen as u64 - 1) / 2);
    let ok = if sum == expect { "ok" } else { "WRONG" };
    println!(
        "rank {me}/{n}: read {} MiB from rank {left}'s arena at {ptr:p} in place ({:.2} GB/s), sum {ok}",
        (nlen * 8) >> 20,
        (nlen * 8) as f64 / elapsed.as_secs_f64() / 1e9,
    );
    drop(theirs); // a cross-rank free: the block goes back to rank `left`
    seg.barrier();

    // 3. Everyone freed what it was given; my arena is back where it began.
    let s = hmpi::shmheap::local_stats().expect("attached");
    println!(
        "rank {me}/{n}: arena in use {} bytes above its baseline, {} remote frees pending, {} MiB backed",
        s.in_use_bytes() as i64 - baseline as i64,
        s.pending_remote_frees,
        s.backed_bytes >> 20
    );
    if sum != expect {
        std::process::exit(1);
    }
    Ok(())
}
