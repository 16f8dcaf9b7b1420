//! Ownership passing around the ring of all ranks: each rank gives a
//! vector and a string to the next and takes the previous rank's, checking
//! every element. Across nodes (feature `mpi`, under `mpirun`) a give to
//! another node sends the value's bytes and frees it there, and a value
//! that owns further heap blocks (a `Vec<String>`) is refused with the
//! value given back; on one node it travels as ever. A give to another
//! node returns once MPI has sent the value (as `MPI_Send`), so even ranks
//! give before they take and odd ranks take first: ranks that all gave a
//! large value across nodes at once would wait for each other. The
//! nonblocking forms (`immediate_give`, `immediate_take` into a
//! `TakeSlot`) need no such order: every rank starts its give and its take
//! at once, and a deep value is refused across nodes by them too. Then
//! the collectives by ownership (scatter, gather, all-to-all) on the same
//! communicator.
//!
//! Run: `cargo build --release --examples && target/release/hmpirun -n 4 target/release/examples/give_ring`

use hmpi::prelude::*;

/// Values given on the node live in the node's heap.
#[global_allocator]
static ALLOC: hmpi::ShmHeap = hmpi::ShmHeap::new();

fn main() {
    if let Err(e) = run() {
        eprintln!("give_ring: {e}");
        std::process::exit(1);
    }
}

fn fail(what: String) -> hmpi::Error {
    hmpi::Error::Internal(what)
}

fn run() -> hmpi::Result<()> {
    let universe = hmpi::init()?;
    let world = universe.world();
    let (me, n) = (world.rank(), world.size());
    let (to, from) = ((me + 1) % n, (me + n - 1) % n);
    let next = world.process_at_rank(to);
    let prev = world.process_at_rank(from);
    let gives_first = me % 2 == 0;
    for len in [0usize, 5, 100_000] {
        let v: Vec<u64> = (0..len as u64).map(|i| i * 3 + me as u64).collect();
        let mut got: Vec<u64> = Vec::new();
        if !gives_first {
            got = prev.take_vec_with_tag(1)?;
        }
        next.give_with_tag(v, 1)?;
        if gives_first {
            got = prev.take_vec_with_tag(1)?;
        }
        let want = (0..len as u64).map(|i| i * 3 + from as u64);
        if got.len() != len || !got.iter().copied().eq(want) {
            return Err(fail(format!("a vector of {len} from rank {from} differs")));
        }
    }
    next.give_with_tag(format!("from rank {me}"), 2)?;
    let (s, st) = prev.take_owned_with_tag::<String>(2)?;
    if s != format!("from rank {from}") || st.source_rank() != from {
        return Err(fail(format!("the string from rank {from}: {s:?}")));
    }
    // A value owning further blocks stays on its node.
    let deep: Vec<String> = vec![format!("{me}"), "x".repeat(100)];
    match next.give_with_tag(deep, 3) {
        Ok(()) if !world.shares_heap_with(to) => {
            return Err(fail(format!(
                "a Vec<String> went to rank {to} on another node"
            )));
        }
        Err(e) if world.shares_heap_with(to) => return Err(e.error),
        Err(e) if e.value[0] != format!("{me}") => {
            return Err(fail("a refused give did not give the value back".into()));
        }
        _ => {}
    }
    if world.shares_heap_with(from) {
        let d: Vec<String> = prev.take_vec_with_tag(3)?;
        if d != [format!("{from}"), "x".repeat(100)] {
            return Err(fail(format!("the Vec<String> from rank {from}: {d:?}")));
        }
    }
    // The nonblocking forms: all give and take at once.
    for len in [0usize, 5, 100_000] {
        let v: Vec<u64> = (0..len as u64).map(|i| i * 7 + me as u64).collect();
        let mut slot = TakeSlot::<Vec<u64>>::new();
        hmpi::request::scope(|scope| -> hmpi::Result<()> {
            let g = next
                .immediate_give_with_tag(scope, v, 4)
                .map_err(|e| e.error)?;
            let t = prev.immediate_take_with_tag(scope, &mut slot, 4)?;
            let st = t.wait()?;
            g.wait()?;
            if st.source_rank() != from {
                return Err(fail(format!(
                    "a nonblocking take from {}",
                    st.source_rank()
                )));
            }
            Ok(())
        })?;
        let got = slot.into_inner()?.unwrap_or_default();
        let want = (0..len as u64).map(|i| i * 7 + from as u64);
        if got.len() != len || !got.iter().copied().eq(want) {
            return Err(fail(format!(
                "a nonblocking vector of {len} from rank {from} differs"
            )));
        }
    }
    let deep: Vec<String> = vec![format!("{me}")];
    hmpi::request::scope(|scope| match next.immediate_give_with_tag(scope, deep, 5) {
        Ok(_) if !world.shares_heap_with(to) => Err(fail(format!(
            "a nonblocking give took a Vec<String> to rank {to} on another node"
        ))),
        Err(e) if world.shares_heap_with(to) => Err(e.error),
        Err(e) if e.value[0] != format!("{me}") => Err(fail(
            "a refused nonblocking give did not give the value back".into(),
        )),
        _ => Ok(()),
    })?;
    if world.shares_heap_with(from) {
        let d: Vec<String> = prev.take_vec_with_tag(5)?;
        if d != [format!("{from}")] {
            return Err(fail(format!("the Vec<String> from rank {from}: {d:?}")));
        }
    }
    collectives(&world)?;
    world.barrier()?;
    if me == 0 {
        println!("give_ring: OK ({n} ranks)");
    }
    Ok(())
}

/// The collectives by ownership on the same communicator: scatter from
/// the last rank, gather to rank 0 and all-to-all, with values large
/// enough that MPI sends them by rendezvous between nodes, each element
/// checked; a value owning further heap blocks is refused on every rank
/// when the communicator spans nodes.
fn collectives(world: &hmpi::SimpleCommunicator) -> hmpi::Result<()> {
    let (me, n) = (world.rank(), world.size());
    let value = |from: i32, to: i32, len: usize| -> Vec<u64> {
        (0..len as u64)
            .map(|i| i ^ ((from as u64) << 40 | (to as u64) << 20))
            .collect()
    };
    for len in [0usize, 5, 300_000] {
        let root = world.process_at_rank(n - 1);
        let mine: Vec<u64> = if me == n - 1 {
            root.scatter_give_root((0..n).map(|r| value(n - 1, r, len)).collect())?
        } else {
            root.scatter_take()?
        };
        if mine != value(n - 1, me, len) {
            return Err(fail(format!("scatter of {len} from rank {}", n - 1)));
        }
        let root = world.process_at_rank(0);
        if me == 0 {
            let all = root.gather_take_root(mine)?;
            for (r, v) in all.iter().enumerate() {
                if *v != value(n - 1, r as i32, len) {
                    return Err(fail(format!("gather of {len}: rank {r}'s value")));
                }
            }
        } else {
            root.gather_give(mine)?;
        }
        let got = all_to_all_give(world, (0..n).map(|r| value(me, r, len)).collect())?;
        for (r, v) in got.iter().enumerate() {
            if *v != value(r as i32, me, len) {
                return Err(fail(format!("all-to-all of {len}: rank {r}'s value")));
            }
        }
    }
    let deep: Vec<Vec<String>> = (0..n).map(|r| vec![format!("{me}->{r}")]).collect();
    let spans = (0..n).any(|r| !world.shares_heap_with(r));
    match all_to_all_give(world, deep) {
        Err(hmpi::Error::Arg { .. }) if spans => Ok(()),
        Ok(got)
            if !spans
                && got
                    .iter()
                    .enumerate()
                    .all(|(r, v)| *v == [format!("{r}->{me}")]) =>
        {
            Ok(())
        }
        other => Err(fail(format!("all-to-all of Vec<String>: {other:?}"))),
    }
}
