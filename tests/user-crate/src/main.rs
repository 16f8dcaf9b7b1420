//! A user's program: only `hmpi` in `Cargo.toml`. Run with
//! `hmpirun -n 2 target/debug/hmpi-user-crate`; it exits non-zero on any
//! wrong result.

use hmpi::prelude::*;

// Zero copy for give/take: every allocation comes from the node heap.
#[global_allocator]
static ALLOC: hmpi::ShmHeap = hmpi::ShmHeap::new();

/// Given from rank to rank without a copy.
#[derive(Transferable, Debug, PartialEq)]
struct Atoms {
    x: Vec<[f64; 3]>,
    id: Vec<u64>,
}

/// Sent as its bytes with a struct datatype, and reduced.
#[derive(Equivalence, Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
struct Sample {
    value: f64,
    hits: u64,
}

fn check(ok: bool, what: &str) -> hmpi::Result<()> {
    if ok {
        Ok(())
    } else {
        Err(hmpi::Error::Internal(format!("wrong result: {what}")))
    }
}

fn main() -> hmpi::Result<()> {
    let universe = hmpi::init()?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    check(size >= 2, "run me with hmpirun -n 2 (or more)")?;
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);

    // The shared heap: this rank's vectors live in its own arena.
    let v = vec![rank as u64; 1024];
    check(hmpi::is_shared(v.as_ptr()), "a vector in the node heap")?;
    check(
        hmpi::owner_of(v.as_ptr()) == Some(rank as u32),
        "a vector in this rank's arena",
    )?;

    // give/take: the heap blocks change owner; nothing is copied.
    let atoms = Box::new(Atoms {
        x: vec![[rank as f64; 3]; 100],
        id: (0..100).map(|i| i + 1000 * rank as u64).collect(),
    });
    next.give(atoms)?;
    let got = prev.take::<Atoms>()?;
    let from = (rank + size - 1) % size;
    check(got.id[0] == 1000 * from as u64, "the taken atoms")?;
    check(got.x[99] == [from as f64; 3], "the taken positions")?;
    check(
        hmpi::owner_of(got.id.as_ptr()) == Some(from as u32),
        "a taken block still in its giver's arena",
    )?;

    // A pooled buffer, given with a tag.
    let mut buf = OpiBuf::<f64>::with_capacity(64)?;
    buf.extend_from_slice(&[rank as f64, 0.5]);
    next.give_with_tag(buf, 7)?;
    let b = prev.take_buf_with_tag::<f64>(7)?;
    check(b[..] == [from as f64, 0.5], "the taken buffer")?;

    // The derived datatype: point-to-point and a reduction.
    let s = Sample {
        value: rank as f64,
        hits: 1,
    };
    next.send(&s)?;
    let (r, _) = prev.receive::<Sample>()?;
    check(r.value == from as f64, "the received sample")?;
    let mut sum = 0.0f64;
    world.all_reduce_into(&s.value, &mut sum, SystemOperation::sum())?;
    let n = size as f64;
    check(sum == n * (n - 1.0) / 2.0, "the sum over the ranks")?;

    if rank == 0 {
        println!("user crate: shared heap, give/take, derives and collectives work through hmpi");
    }
    Ok(())
}
