//! The exchange of the neighbourhood collectives on a communicator that
//! spans nodes (`MPI_Neighbor_allgather(v)`, `MPI_Neighbor_alltoall(v,w)`
//! and their nonblocking forms, whose blocks
//! [`crate::collective::neighbor`] packs and unpacks).
//!
//! Each block travels as one message from its sender to its receiver
//! through the routing point: through the heap to a member of the same
//! node, through MPI to one on another node. Only neighbours exchange,
//! so a stencil's halo costs what its point-to-point form would, whatever
//! the communicator's size. Block `k` of a sender carries tag `k`, which
//! pairs it with the receive block that the topology pairs with it even
//! when two processes are neighbours more than once (a periodic
//! dimension of one or two processes). The messages go on a duplicate of
//! the communicator, never on the communicator itself, so they cannot
//! meet the caller's messages: the blocking forms use the communicator's
//! private duplicate ([`SpanningCommunicator::internal`]), the
//! nonblocking forms the duplicate of the communicator's progress thread
//! ([`super::icoll`]).

use super::comm::SpanningCommunicator;
use crate::error::{Error, Result};
use crate::raw::PROC_NULL;

impl SpanningCommunicator {
    /// One neighbourhood exchange on this communicator: `blocks[k]` to
    /// member `dests[k]`; receive block `m` is the block `pairing[m]` of
    /// member `sources[m]` and must be `want[m]` bytes long. Nothing
    /// travels to or from `PROC_NULL` (its receive block stays empty).
    /// Collective over the neighbours; [`Error::Arg`] for a block whose
    /// length is not what its receiver expects.
    pub(crate) fn neighbor_exchange(
        &self,
        dests: &[i32],
        blocks: &[Vec<u8>],
        sources: &[i32],
        pairing: &[usize],
        want: &[usize],
    ) -> Result<Vec<Vec<u8>>> {
        let tag = |k: usize| {
            i32::try_from(k)
                .ok()
                .filter(|&t| t <= self.tag_ub())
                .ok_or_else(|| Error::Arg {
                    reason: format!(
                        "neighbourhood collective: block {k} of a process needs a tag above \
                         the largest one ({})",
                        self.tag_ub()
                    ),
                })
        };
        let mut got: Vec<Vec<u8>> = sources
            .iter()
            .zip(want)
            .map(|(&s, &n)| {
                if s == PROC_NULL {
                    Vec::new()
                } else {
                    vec![0; n]
                }
            })
            .collect();
        let mut err = None;
        {
            let mut recvs = Vec::with_capacity(sources.len());
            let mut sends = Vec::with_capacity(dests.len());
            for (m, buf) in got.iter_mut().enumerate() {
                if sources[m] == PROC_NULL {
                    continue;
                }
                // SAFETY: every request is waited for below, or dropped
                // (which waits) when this function returns early, before
                // `got` is touched again.
                recvs.push((m, unsafe { self.irecv(buf, sources[m], tag(pairing[m])?) }?));
            }
            for (k, b) in blocks.iter().enumerate() {
                if dests[k] == PROC_NULL {
                    continue;
                }
                // SAFETY: as for the receives; `blocks` outlives them.
                sends.push(unsafe { self.isend(b, dests[k], tag(k)?, false) }?);
            }
            for (m, r) in recvs {
                let e = match r.wait() {
                    Ok(st) if st.error.is_none() && st.count == want[m] as u64 => continue,
                    Ok(st) => Error::Arg {
                        reason: format!(
                            "neighbourhood collective: rank {} sends {}{} bytes where this \
                             rank expects {} (counts or datatypes differ)",
                            sources[m],
                            if st.error.is_some() { "more than " } else { "" },
                            st.count,
                            want[m]
                        ),
                    },
                    Err(e) => e,
                };
                err.get_or_insert(e);
            }
            for r in sends {
                if let Err(e) = r.wait() {
                    err.get_or_insert(e);
                }
            }
        }
        err.map_or(Ok(got), Err)
    }
}
