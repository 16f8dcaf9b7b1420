//! Hierarchical broadcast and allreduce for nodes with several cache or
//! memory domains.
//!
//! On a node whose cores fall into several domains (L3 caches,
//! packages), a flat collective makes every member read across the
//! domain boundaries; a hierarchical one crosses them once per domain: the
//! members of a domain work among themselves, and one leader per domain
//! (its lowest rank) works with the other leaders.
//!
//! * broadcast: the root's domain first (from the root), then the leaders
//!   (from the root's domain's leader), then every other domain (from its
//!   leader);
//! * allreduce: a reduce inside each domain to its leader, an allreduce
//!   among the leaders, a broadcast inside each domain. Every rank gets
//!   the leaders' bits, so the result is identical everywhere; it is
//!   combined in rank order when the domains are contiguous rank ranges,
//!   so a non-commutative operation on interleaved domains stays flat.
//!
//! Which rank is in which domain: `HMPI_COLL_DOMAINS=k` pretends the ranks
//! form `k` domains of contiguous ranks (so that the hierarchical path
//! runs, and is tested, on a machine with one domain); otherwise the domain
//! the launcher gives each rank it binds (`HMPI_NODE_DOMAIN`, set when the
//! bound ranks span several L3 caches, NUMA nodes or sockets:
//! [`crate::launch::topo::Mapping::domains`]); otherwise, with the
//! cargo feature `hwloc`, the topology (`hwloc2`): the L3 cache, else the
//! package that holds the CPUs this process is bound to (when the node has
//! several), agreed among the members; a process bound across domains, or
//! a topology that cannot be read, gives one domain for all. With one domain
//! (or a communicator of one member per domain at most) the flat
//! algorithms run.
//!
//! Only blocking calls take the hierarchical path (the nonblocking ones
//! stay flat), and only on the communicators a program makes: the
//! per-domain and leader communicators created for a communicator (once,
//! at its first blocking broadcast or allreduce, collectively) run flat.
//! A communicator that has been planned (with `HMPI_COLL_DOMAINS`,
//! `HMPI_NODE_DOMAIN` or the `hwloc` feature only) stays alive, with its
//! parts, until the process ends.

use crate::collective::raw::{self, Mode};
use crate::comm::SimpleCommunicator;
use crate::datatype::Datatype;
use crate::error::{Error, Result};
use crate::op::Operation;
use crate::traits::Communicator;
use std::cell::Cell;
use std::sync::{Arc, Mutex, OnceLock};

/// The variable that pretends the ranks form that many domains.
pub const DOMAINS_VAR: &str = "HMPI_COLL_DOMAINS";

/// A communicator's domains and the communicators that serve them.
#[derive(Debug)]
pub(crate) struct Hier {
    /// The members of this rank's domain, in rank order.
    local: SimpleCommunicator,
    /// The domains' leaders, in rank order (leaders only).
    leaders: Option<SimpleCommunicator>,
    /// The domain of each rank.
    domain: Vec<u32>,
    /// Whether every domain is a contiguous range of ranks.
    contiguous: bool,
}

thread_local! {
    /// Set while a hierarchical collective runs its parts (which run flat).
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// The communicators seen so far and their plans (`None`: flat).
type Plans = Vec<(SimpleCommunicator, Option<Arc<Hier>>)>;
static PLANS: Mutex<Plans> = Mutex::new(Vec::new());

/// Runs `f` with the parts of a hierarchical collective kept flat.
fn inside<T>(f: impl FnOnce() -> T) -> T {
    let before = INSIDE.with(|c| c.replace(true));
    let r = f();
    INSIDE.with(|c| c.set(before));
    r
}

/// The number of domains `HMPI_COLL_DOMAINS` asks for, if set (read once:
/// every blocking broadcast and allreduce asks).
fn forced() -> Result<Option<u32>> {
    static FORCED: OnceLock<std::result::Result<Option<u32>, String>> = OnceLock::new();
    FORCED
        .get_or_init(|| {
            let Ok(v) = std::env::var(DOMAINS_VAR) else {
                return Ok(None);
            };
            match v.trim().parse::<u32>() {
                Ok(k) if k >= 1 => Ok(Some(k)),
                _ => Err(format!(
                    "{DOMAINS_VAR}={v:?}: a number of domains (1 or more) expected"
                )),
            }
        })
        .clone()
        .map_err(|reason| Error::Arg { reason })
}

/// This rank's domain as the launcher gives it (`HMPI_NODE_DOMAIN`), if
/// set (read once).
fn given() -> Result<Option<u32>> {
    static GIVEN: OnceLock<std::result::Result<Option<u32>, String>> = OnceLock::new();
    let var = crate::launch::topo::DOMAIN_VAR;
    GIVEN
        .get_or_init(|| {
            let Ok(v) = std::env::var(var) else {
                return Ok(None);
            };
            // u32::MAX stands for "unknown" among the members.
            match v.trim().parse::<u32>() {
                Ok(d) if d < u32::MAX => Ok(Some(d)),
                _ => Err(format!("{var}={v:?}: a domain number expected")),
            }
        })
        .clone()
        .map_err(|reason| Error::Arg { reason })
}

/// This process's domain from the machine's topology (`None`: unknown).
#[cfg(feature = "hwloc")]
fn detected() -> Option<u32> {
    use hwloc2::{CpuBindFlags, ObjectType, Topology};
    let topo = Topology::new()?;
    let mine = topo.get_cpubind(CpuBindFlags::CPUBIND_PROCESS)?;
    // L3 caches, then packages: levels of the main tree. (NUMA nodes are
    // memory objects off the tree in hwloc 2, whose special depth the
    // bindings do not handle.)
    for kind in [ObjectType::L3Cache, ObjectType::Package] {
        let Ok(depth) = topo.depth_for_type(&kind) else {
            continue;
        };
        if depth >= topo.depth() {
            continue;
        }
        let objs = topo.objects_at_depth(depth);
        if objs.len() < 2 {
            continue;
        }
        let cpus: Vec<u32> = (0..=mine.last().max(0) as u32)
            .filter(|&c| mine.is_set(c))
            .collect();
        for o in objs {
            // The domain that holds every CPU this process may run on.
            if let Some(set) = o.cpuset() {
                if !cpus.is_empty() && cpus.iter().all(|&c| set.is_set(c)) {
                    return Some(o.logical_index());
                }
            }
        }
    }
    None
}

#[cfg(not(feature = "hwloc"))]
fn detected() -> Option<u32> {
    None
}

/// The domain of every member of `comm` (collective when the topology is
/// read: the members agree on it).
fn domains(comm: &SimpleCommunicator) -> Result<Vec<u32>> {
    let n = comm.size() as usize;
    if let Some(k) = forced()? {
        let k = k as usize;
        return Ok((0..n).map(|r| (r * k / n) as u32).collect());
    }
    let given = given()?;
    if given.is_none() && !cfg!(feature = "hwloc") {
        return Ok(vec![0; n]);
    }
    // Unknown is u32::MAX; every member's value, gathered (the launcher
    // sets the variable for every rank of a job or for none).
    let mine = given.or_else(detected).unwrap_or(u32::MAX);
    let mut all = vec![0u32; n];
    let dt = Datatype::basic(crate::datatype::BasicType::U32);
    let send = raw::Buf {
        ptr: (&mine as *const u32).cast(),
        count: 1,
        dt: &dt,
    };
    let counts = vec![1usize; n];
    let displs: Vec<usize> = (0..n).collect();
    // SAFETY: `mine` holds one u32, `all` one per member; both outlive
    // the blocking call.
    unsafe {
        raw::allgatherv(
            comm,
            Some(send),
            all.as_mut_ptr().cast(),
            &counts,
            &displs,
            &dt,
            Mode::Block,
        )
    }?;
    if all.contains(&u32::MAX) {
        return Ok(vec![0; n]);
    }
    Ok(all)
}

/// The plan of `comm`: `Some` when its blocking broadcasts and allreduces
/// go hierarchical. Collective the first time on a communicator (every
/// member calls it at the same collective).
pub(crate) fn plan(comm: &SimpleCommunicator) -> Result<Option<Arc<Hier>>> {
    // An endpoints communicator cannot be split (its endpoints would
    // share their process's context ids): its collectives stay flat.
    if comm.is_endpoints()
        || INSIDE.with(Cell::get)
        || forced()?.is_none() && given()?.is_none() && !cfg!(feature = "hwloc")
    {
        return Ok(None);
    }
    {
        let plans = PLANS.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, p)) = plans.iter().find(|(c, _)| c.same_as(comm)) {
            return Ok(p.clone());
        }
    }
    let p = inside(|| build(comm))?;
    let mut plans = PLANS.lock().unwrap_or_else(|p| p.into_inner());
    plans.push((comm.clone(), p.clone()));
    Ok(p)
}

/// How many domains the blocking broadcasts and allreduces of `comm` go
/// through: `Some(k)` once a hierarchical plan is in use (after its first
/// such collective), `None` while they run flat.
pub fn domains_in_use(comm: &SimpleCommunicator) -> Option<usize> {
    let plans = PLANS.lock().unwrap_or_else(|p| p.into_inner());
    let (_, p) = plans.iter().find(|(c, _)| c.same_as(comm))?;
    p.as_ref().map(|h| {
        let mut ids = h.domain.clone();
        ids.sort_unstable();
        ids.dedup();
        ids.len()
    })
}

fn build(comm: &SimpleCommunicator) -> Result<Option<Arc<Hier>>> {
    let domain = domains(comm)?;
    let me = comm.rank() as usize;
    let mut ids = domain.clone();
    ids.sort_unstable();
    ids.dedup();
    // One domain, or one member per domain: nothing to gain.
    if ids.len() < 2 || ids.len() == domain.len() {
        return Ok(None);
    }
    let leader = (0..me).all(|r| domain[r] != domain[me]);
    let local = comm
        .split(Some(domain[me]), me as i32)?
        .ok_or_else(|| Error::Internal("a rank without its domain".into()))?;
    let leaders = comm.split(leader.then_some(0), me as i32)?;
    let contiguous = (1..domain.len())
        .all(|r| domain[r] == domain[r - 1] || (0..r).all(|q| domain[q] != domain[r]));
    Ok(Some(Arc::new(Hier {
        local,
        leaders,
        domain,
        contiguous,
    })))
}

impl Hier {
    /// Rank `r`'s rank in its domain's communicator.
    fn local_rank(&self, r: usize) -> i32 {
        (0..r).filter(|&q| self.domain[q] == self.domain[r]).count() as i32
    }

    /// The rank among the leaders of `r`'s domain's leader.
    fn leader_rank(&self, r: usize) -> i32 {
        let first = (0..self.domain.len())
            .find(|&q| self.domain[q] == self.domain[r])
            .unwrap_or(0);
        (0..first)
            .filter(|&q| (0..q).all(|p| self.domain[p] != self.domain[q]))
            .count() as i32
    }

    /// Whether an allreduce with `op` may go hierarchical: the combination
    /// order must stay the rank order unless `op` commutes.
    pub(crate) fn reduces(&self, op: &Operation) -> bool {
        self.contiguous || op.is_commutative()
    }

    /// A blocking broadcast from `root` (of `comm`, this plan's).
    ///
    /// # Safety
    /// As [`raw::bcast`] with [`Mode::Block`].
    pub(crate) unsafe fn bcast(
        &self,
        comm: &SimpleCommunicator,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        root: u32,
    ) -> Result<()> {
        let (me, root) = (comm.rank() as usize, root as usize);
        let in_root_domain = self.domain[me] == self.domain[root];
        inside(|| {
            if in_root_domain {
                // SAFETY: the caller's guarantee.
                unsafe {
                    raw::bcast(
                        &self.local,
                        buf,
                        count,
                        dt,
                        self.local_rank(root),
                        Mode::Block,
                    )
                }?;
            }
            if let Some(l) = &self.leaders {
                // SAFETY: as above.
                unsafe { raw::bcast(l, buf, count, dt, self.leader_rank(root), Mode::Block) }?;
            }
            if !in_root_domain {
                // SAFETY: as above.
                unsafe { raw::bcast(&self.local, buf, count, dt, 0, Mode::Block) }?;
            }
            Ok(())
        })
    }

    /// A blocking allreduce (`send: None` in place).
    ///
    /// # Safety
    /// As [`raw::reduce`] with [`Mode::Block`] and no root.
    pub(crate) unsafe fn allreduce(
        &self,
        send: Option<*const u8>,
        recv: *mut u8,
        count: usize,
        dt: &Datatype,
        op: &Operation,
    ) -> Result<()> {
        let leader = self.leaders.is_some();
        inside(|| {
            // In place away from the leader: the input is in `recv`.
            let s = if leader {
                send
            } else {
                Some(send.unwrap_or(recv.cast_const()))
            };
            // SAFETY: the caller's guarantee for `send` and `recv`.
            unsafe { raw::reduce(&self.local, s, recv, count, dt, op, Some(0), Mode::Block) }?;
            if let Some(l) = &self.leaders {
                // SAFETY: as above; the leader's partial result is in `recv`.
                unsafe { raw::reduce(l, None, recv, count, dt, op, None, Mode::Block) }?;
            }
            // SAFETY: as above.
            unsafe { raw::bcast(&self.local, recv, count, dt, 0, Mode::Block) }?;
            Ok(())
        })
    }
}
