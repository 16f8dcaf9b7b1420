//! The node's topology as the launcher places ranks on it: which hardware
//! threads (PUs) form a core, share an L3 cache, a NUMA node, a socket.
//!
//! [`Topology::detect`] reads it with hwloc (cargo feature `hwloc`) or else
//! from `/sys/devices/system` ([`Topology::from_sysfs`]); a level the source
//! cannot tell is unknown, and placing ranks by it is an error that says so.
//! [`Topology::map`] is a pure function of a topology, the CPUs the launcher
//! may use and the options, so that placements of machines other than this
//! one are tested with synthetic topologies ([`Topology::new`]).
//!
//! The options mean what they mean to Open MPI's `mpirun`: `--map-by X`
//! decides where rank `i` is placed (round robin over the objects of level
//! X, in logical order: rank `i` in object `i mod count`), `--bind-to Y` how
//! wide its CPU set is: the object of level Y that holds its place when Y
//! is as wide as X or wider; when Y is narrower, the `j`-th rank placed in
//! an object gets that object's `j`-th Y (its `j`-th group of `PE` Ys with
//! `:PE=n`), round robin. Only the CPUs the launcher may use count; more
//! ranks than places wrap round.
//!
//! # Example
//! ```
//! use hmpi_core::launch::topo::{Level, Pu, Topology};
//!
//! // Two sockets of two cores, one CPU each.
//! let pu = |cpu: usize| Pu {
//!     cpu,
//!     core: cpu as u32,
//!     l3: Some(cpu as u32 / 2),
//!     numa: Some(cpu as u32 / 2),
//!     socket: Some(cpu as u32 / 2),
//! };
//! let topo = Topology::new((0..4).map(pu).collect()).unwrap();
//! let m = topo.map(&[0, 1, 2, 3], 4, Level::Socket, Some(Level::Core), 1).unwrap();
//! assert_eq!(m.cpus, vec![Some(vec![0]), Some(vec![2]), Some(vec![1]), Some(vec![3])]);
//! assert_eq!(m.domains, Some(vec![0, 1, 0, 1]));
//! assert!(!m.oversubscribed);
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::path::Path;

/// The variable through which the launcher gives each bound rank its cache
/// or memory domain ([`Mapping::domains`]), which the collectives' hierarchy
/// prefers to its own reading of the topology. Set only when the ranks span
/// two domains or more.
pub const DOMAIN_VAR: &str = "HMPI_NODE_DOMAIN";

/// The line `mpirun --report-bindings` prints for a rank that is not bound.
pub fn unbound_line(rank: u32) -> String {
    format!("MCW rank {rank} is not bound (or bound to all available processors)")
}

/// A level of the topology, from the narrowest to the widest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// One hardware thread (PU).
    HwThread,
    /// A core and its hardware threads.
    Core,
    /// The CPUs sharing an L3 cache.
    L3Cache,
    /// The CPUs of a NUMA node.
    Numa,
    /// The CPUs of a socket (package).
    Socket,
}

impl Level {
    /// Every level, narrowest first.
    pub const ALL: [Level; 5] = [
        Level::HwThread,
        Level::Core,
        Level::L3Cache,
        Level::Numa,
        Level::Socket,
    ];

    /// The level's name on `mpirun`'s command line.
    pub fn name(self) -> &'static str {
        match self {
            Level::HwThread => "hwthread",
            Level::Core => "core",
            Level::L3Cache => "l3cache",
            Level::Numa => "numa",
            Level::Socket => "socket",
        }
    }

    /// The level named `s` (`package` is `socket`, as in Open MPI).
    pub fn parse(s: &str) -> Option<Level> {
        match s {
            "package" => Some(Level::Socket),
            _ => Level::ALL.into_iter().find(|l| l.name() == s),
        }
    }

    /// The objects of this level in plain words, for messages.
    fn plural(self) -> &'static str {
        match self {
            Level::HwThread => "hardware threads",
            Level::Core => "cores",
            Level::L3Cache => "L3 caches",
            Level::Numa => "NUMA nodes",
            Level::Socket => "sockets",
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One hardware thread and the objects that hold it. Ids are unique per
/// level across the node; `None` is an object the source cannot tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pu {
    /// The CPU's number (the kernel's, as in `sched_setaffinity`).
    pub cpu: usize,
    /// Its core.
    pub core: u32,
    /// Its L3 cache.
    pub l3: Option<u32>,
    /// Its NUMA node.
    pub numa: Option<u32>,
    /// Its socket.
    pub socket: Option<u32>,
}

impl Pu {
    /// The id of the object of `level` that holds this PU.
    pub fn id(&self, level: Level) -> Option<u32> {
        match level {
            Level::HwThread => u32::try_from(self.cpu).ok(),
            Level::Core => Some(self.core),
            Level::L3Cache => self.l3,
            Level::Numa => self.numa,
            Level::Socket => self.socket,
        }
    }
}

/// Where the topology came from (for messages about unknown levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// hwloc (feature `hwloc`).
    Hwloc,
    /// `/sys/devices/system`.
    Sysfs,
    /// Given by the program ([`Topology::new`]).
    Given,
}

/// A node's hardware threads in logical order (those of one core together,
/// cores of one L3, NUMA node and socket together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    pus: Vec<Pu>,
    source: Source,
}

/// Why ranks cannot be placed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopoError(pub String);

impl fmt::Display for TopoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TopoError {}

fn err<T>(msg: impl Into<String>) -> Result<T, TopoError> {
    Err(TopoError(msg.into()))
}

/// Where the ranks go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mapping {
    /// The CPUs of each rank, increasing (`None`: not bound).
    pub cpus: Vec<Option<Vec<usize>>>,
    /// How many ranks the CPUs hold without sharing: the cores the launcher
    /// may use (hardware threads when mapping or binding by hwthread); 0
    /// from [`super::Launcher::placement`] for ranks that are not bound
    /// (no topology is read then).
    pub slots: usize,
    /// More ranks (times `PE`) than slots: ranks share CPUs.
    pub oversubscribed: bool,
    /// The cache or memory domain of each rank, for the collectives'
    /// hierarchy: the id of the L3 cache (else NUMA node, else socket) that
    /// holds each rank's CPUs, at the narrowest of these levels where every
    /// rank's CPUs sit in one object and the ranks span two or more;
    /// `None` when there is no such level (or the ranks are not bound).
    pub domains: Option<Vec<u32>>,
}

impl Topology {
    /// A topology of these PUs, taken in the order given (which should be
    /// logical: the PUs of one object together). Errors: no PU, a CPU
    /// twice, or a core whose PUs disagree on a wider object.
    pub fn new(pus: Vec<Pu>) -> Result<Topology, TopoError> {
        Topology::with_source(pus, Source::Given)
    }

    fn with_source(pus: Vec<Pu>, source: Source) -> Result<Topology, TopoError> {
        if pus.is_empty() {
            return err("the topology has no CPU");
        }
        let mut seen = BTreeSet::new();
        for p in &pus {
            if !seen.insert(p.cpu) {
                return err(format!("CPU {} appears twice in the topology", p.cpu));
            }
            if let Some(q) = pus.iter().find(|q| q.core == p.core) {
                if (q.l3, q.numa, q.socket) != (p.l3, p.numa, p.socket) {
                    return err(format!(
                        "CPUs {} and {} share core {} but not its cache, node or socket",
                        q.cpu, p.cpu, p.core
                    ));
                }
            }
        }
        Ok(Topology { pus, source })
    }

    /// The PUs, in logical order.
    pub fn pus(&self) -> &[Pu] {
        &self.pus
    }

    /// Where this topology came from.
    pub fn source(&self) -> Source {
        self.source
    }

    /// This machine's topology: from hwloc with feature `hwloc`, else from
    /// `/sys`.
    pub fn detect() -> Result<Topology, TopoError> {
        #[cfg(feature = "hwloc")]
        {
            Topology::from_hwloc()
        }
        #[cfg(not(feature = "hwloc"))]
        {
            Topology::from_sysfs(Path::new("/sys"))
        }
    }

    /// The topology hwloc reports: PUs in hwloc's logical order, ids its
    /// logical indexes (NUMA nodes by their OS index, from each PU's
    /// nodeset).
    #[cfg(feature = "hwloc")]
    pub fn from_hwloc() -> Result<Topology, TopoError> {
        use hwloc2::{ObjectType, TopologyObject};
        let topo = hwloc2::Topology::new()
            .ok_or_else(|| TopoError("hwloc cannot read this machine's topology".into()))?;
        let pus = topo
            .objects_with_type(&ObjectType::PU)
            .map_err(|e| TopoError(format!("hwloc lists no hardware threads: {e:?}")))?;
        let above = |pu: &TopologyObject, kind: ObjectType| -> Option<u32> {
            let mut o = pu.parent();
            while let Some(obj) = o {
                if obj.object_type() == kind {
                    return Some(obj.logical_index());
                }
                o = obj.parent();
            }
            None
        };
        let list = pus
            .iter()
            .map(|pu| {
                let numa = pu.nodeset().and_then(|set| {
                    // A PU near exactly one NUMA node sits in it.
                    (set.weight() == 1)
                        .then(|| set.first())
                        .and_then(|n| u32::try_from(n).ok())
                });
                Pu {
                    cpu: pu.os_index() as usize,
                    // A PU without a core object is its own core, with an
                    // id beyond every real core's.
                    core: above(pu, ObjectType::Core)
                        .unwrap_or_else(|| u32::MAX / 2 + pu.logical_index()),
                    l3: above(pu, ObjectType::L3Cache),
                    numa,
                    socket: above(pu, ObjectType::Package),
                }
            })
            .collect();
        Topology::with_source(list, Source::Hwloc)
    }

    /// The topology of the online CPUs under `root` (normally `/sys`): the
    /// cores from `cpuN/topology/core_cpus_list` (or `thread_siblings_list`;
    /// a CPU without either is a core of its own), the sockets from
    /// `physical_package_id`, the L3 caches from the level-3 entry of
    /// `cpuN/cache`, the NUMA nodes from `devices/system/node/nodeK/cpulist`
    /// (a kernel without `node` has one node).
    pub fn from_sysfs(root: &Path) -> Result<Topology, TopoError> {
        let cpu_dir = root.join("devices/system/cpu");
        let read = |p: &Path| {
            std::fs::read_to_string(p)
                .ok()
                .map(|s| s.trim().to_string())
        };
        let online = read(&cpu_dir.join("online")).ok_or_else(|| {
            TopoError(format!("cannot read {}", cpu_dir.join("online").display()))
        })?;
        let cpus = parse_list(&online)
            .ok_or_else(|| TopoError(format!("cannot parse the online CPUs {online:?}")))?;
        let node_dir = root.join("devices/system/node");
        let mut numa_of = std::collections::BTreeMap::new();
        let numa_known = node_dir.is_dir();
        if let Ok(entries) = std::fs::read_dir(&node_dir) {
            for e in entries.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                let Some(Ok(node)) = name.strip_prefix("node").map(str::parse::<u32>) else {
                    continue;
                };
                let list = read(&e.path().join("cpulist")).unwrap_or_default();
                for cpu in parse_list(&list).unwrap_or_default() {
                    numa_of.insert(cpu, node);
                }
            }
        }
        struct Raw {
            cpu: usize,
            core: Vec<usize>,
            l3: Option<Vec<usize>>,
            socket: Option<u32>,
        }
        let mut raw = Vec::with_capacity(cpus.len());
        for &cpu in &cpus {
            let dir = cpu_dir.join(format!("cpu{cpu}"));
            let core = ["core_cpus_list", "thread_siblings_list"]
                .iter()
                .find_map(|f| parse_list(&read(&dir.join("topology").join(f))?))
                .filter(|l| l.contains(&cpu))
                .unwrap_or_else(|| vec![cpu]);
            let socket = read(&dir.join("topology/physical_package_id"))
                .and_then(|s| s.parse::<i64>().ok())
                .and_then(|s| u32::try_from(s).ok());
            let mut l3 = None;
            if let Ok(entries) = std::fs::read_dir(dir.join("cache")) {
                for e in entries.flatten() {
                    let p = e.path();
                    if read(&p.join("level")).as_deref() == Some("3")
                        && read(&p.join("type")).as_deref() != Some("Instruction")
                    {
                        l3 = read(&p.join("shared_cpu_list")).and_then(|s| parse_list(&s));
                    }
                }
            }
            raw.push(Raw {
                cpu,
                core,
                l3,
                socket,
            });
        }
        // Global ids: an object is named by the index of its first CPU
        // among the objects of its level, in CPU order.
        let index_of = |lists: Vec<Option<usize>>| -> Vec<Option<u32>> {
            let firsts: BTreeSet<usize> = lists.iter().flatten().copied().collect();
            lists
                .iter()
                .map(|f| f.map(|f| firsts.range(..f).count() as u32))
                .collect()
        };
        let cores = index_of(raw.iter().map(|r| r.core.iter().min().copied()).collect());
        let l3s = index_of(
            raw.iter()
                .map(|r| r.l3.as_ref().and_then(|l| l.iter().min().copied()))
                .collect(),
        );
        let mut pus: Vec<Pu> = raw
            .iter()
            .zip(cores.iter().zip(&l3s))
            .map(|(r, (core, l3))| Pu {
                cpu: r.cpu,
                core: core.unwrap_or(0),
                l3: *l3,
                numa: if numa_known {
                    numa_of.get(&r.cpu).copied()
                } else {
                    Some(0)
                },
                socket: r.socket,
            })
            .collect();
        // Logical order: by socket, NUMA node, L3, core, CPU.
        pus.sort_by_key(|p| (p.socket, p.numa, p.l3, p.core, p.cpu));
        Topology::with_source(pus, Source::Sysfs)
    }

    /// Why `level` cannot be used, if it cannot: some PU of `pus` has no
    /// object of that level.
    fn check_known(&self, pus: &[Pu], level: Level) -> Result<(), TopoError> {
        if pus.iter().all(|p| p.id(level).is_some()) {
            return Ok(());
        }
        let what = level.plural();
        err(match self.source {
            Source::Sysfs => format!(
                "the {what} of this machine are not in /sys/devices/system; \
                 build hmpi-core with the cargo feature `hwloc` to read them with hwloc"
            ),
            Source::Hwloc => format!("hwloc knows no {what} on this machine"),
            Source::Given => format!("the topology does not say which {what} hold every CPU"),
        })
    }

    /// Places `ranks` ranks on the CPUs `allowed` (the launcher's): by
    /// `map` (see the module's documentation), each bound to the objects
    /// of level `bind` (`None`: not bound), `pe` of them per rank (`pe` > 1
    /// needs `bind` to be `hwthread` or `core`).
    pub fn map(
        &self,
        allowed: &[usize],
        ranks: u32,
        map: Level,
        bind: Option<Level>,
        pe: u32,
    ) -> Result<Mapping, TopoError> {
        let pus: Vec<Pu> = self
            .pus
            .iter()
            .filter(|p| allowed.contains(&p.cpu))
            .copied()
            .collect();
        if pus.is_empty() {
            return err("none of the CPUs this process may use is in the node's topology");
        }
        if pe == 0 {
            return err("PE must be 1 or more");
        }
        if pe > 1 && bind.is_some_and(|b| b > Level::Core) {
            return err(format!(
                "PE={pe} binds each rank to {pe} cores or hardware threads, not to {}",
                bind.map_or("", |b| b.plural())
            ));
        }
        self.check_known(&pus, map)?;
        if let Some(b) = bind {
            self.check_known(&pus, b)?;
        }
        let narrowest = bind.map_or(map, |b| b.min(map));
        let slot_level = if narrowest == Level::HwThread {
            Level::HwThread
        } else {
            Level::Core
        };
        let slots = groups(&pus, slot_level).len();
        let places = groups(&pus, map);
        let mut cpus = Vec::with_capacity(ranks as usize);
        for r in 0..ranks as usize {
            let place = &places[r % places.len()];
            let Some(b) = bind else {
                cpus.push(None);
                continue;
            };
            let mut set: Vec<usize> = if pe > 1 && b >= map {
                // `--map-by core:PE=n`: rank r takes the r-th run of n
                // consecutive units (round robin over the whole runs).
                let units = groups(&pus, b);
                if pe as usize > units.len() {
                    return err(format!(
                        "PE={pe} asks for more {} than the launcher may use ({})",
                        b.plural(),
                        units.len()
                    ));
                }
                let runs = units.len() / pe as usize;
                let c = r % runs;
                units[c * pe as usize..(c + 1) * pe as usize]
                    .iter()
                    .flatten()
                    .map(|p| p.cpu)
                    .collect()
            } else if b <= map {
                // The j-th rank in this place takes its j-th group of PE
                // units of level b.
                let units = groups(place, b);
                if pe as usize > units.len() {
                    return err(format!(
                        "PE={pe} asks for more {} than one {} has ({})",
                        b.plural(),
                        map.name(),
                        units.len()
                    ));
                }
                let j = r / places.len();
                (0..pe as usize)
                    .flat_map(|k| units[(j * pe as usize + k) % units.len()].iter())
                    .map(|p| p.cpu)
                    .collect()
            } else {
                let id = place[0].id(b);
                pus.iter()
                    .filter(|p| p.id(b) == id)
                    .map(|p| p.cpu)
                    .collect()
            };
            set.sort_unstable();
            set.dedup();
            cpus.push(Some(set));
        }
        let oversubscribed = bind.is_some() && u64::from(ranks) * u64::from(pe) > slots as u64;
        let domains = domains_of(&pus, &cpus);
        Ok(Mapping {
            cpus,
            slots,
            oversubscribed,
            domains,
        })
    }

    /// The line `mpirun --report-bindings` prints for a rank bound to
    /// `cpus` (`None`: not bound), without the `[host:pid] ` prefix: the
    /// cores it is bound to, the node's sockets as a bracket map (`B` a PU
    /// of the rank, `.` another, `/` between cores), and the L3 caches,
    /// NUMA nodes and sockets it sits in.
    pub fn report_line(&self, rank: u32, cpus: Option<&[usize]>) -> String {
        let Some(cpus) = cpus else {
            return unbound_line(rank);
        };
        let mine: Vec<&Pu> = self.pus.iter().filter(|p| cpus.contains(&p.cpu)).collect();
        // "socket S[core C[hwt a,b]]" per core, as Open MPI names them.
        let mut parts = Vec::new();
        for core in groups_ref(&mine, Level::Core) {
            let all: Vec<&Pu> = self.pus.iter().filter(|p| p.core == core[0].core).collect();
            let hwts: Vec<String> = all
                .iter()
                .enumerate()
                .filter(|(_, p)| cpus.contains(&p.cpu))
                .map(|(i, _)| i.to_string())
                .collect();
            let inner = format!("core {}[hwt {}]", core[0].core, hwts.join(","));
            parts.push(match core[0].socket {
                Some(s) => format!("socket {s}[{inner}]"),
                None => inner,
            });
        }
        let mut map = String::new();
        for socket in groups_ref(&self.pus.iter().collect::<Vec<_>>(), Level::Socket) {
            map.push('[');
            let cores: Vec<String> = groups_ref(&socket, Level::Core)
                .iter()
                .map(|core| {
                    core.iter()
                        .map(|p| if cpus.contains(&p.cpu) { 'B' } else { '.' })
                        .collect()
                })
                .collect();
            map.push_str(&cores.join("/"));
            map.push(']');
        }
        let mut where_ = Vec::new();
        for (level, name) in [
            (Level::L3Cache, "L3"),
            (Level::Numa, "NUMA"),
            (Level::Socket, "socket"),
        ] {
            let ids: BTreeSet<Option<u32>> = mine.iter().map(|p| p.id(level)).collect();
            if ids.iter().all(Option::is_some) && !ids.is_empty() {
                let ids: Vec<String> = ids.iter().flatten().map(u32::to_string).collect();
                where_.push(format!("{name} {}", ids.join(",")));
            }
        }
        format!(
            "MCW rank {rank} bound to {}: {map} ({})",
            parts.join(", "),
            where_.join(", ")
        )
    }
}

/// The PUs of `pus` grouped by their object of `level`, groups in order of
/// their first PU (a PU without an object at that level is left out).
fn groups(pus: &[Pu], level: Level) -> Vec<Vec<Pu>> {
    let refs: Vec<&Pu> = pus.iter().collect();
    groups_ref(&refs, level)
        .into_iter()
        .map(|g| g.into_iter().copied().collect())
        .collect()
}

fn groups_ref<'a>(pus: &[&'a Pu], level: Level) -> Vec<Vec<&'a Pu>> {
    let mut out: Vec<(Option<u32>, Vec<&Pu>)> = Vec::new();
    for &p in pus {
        let id = p.id(level);
        match out.iter_mut().find(|(i, _)| *i == id) {
            Some((_, g)) => g.push(p),
            None => out.push((id, vec![p])),
        }
    }
    out.into_iter().map(|(_, g)| g).collect()
}

/// See [`Mapping::domains`].
fn domains_of(pus: &[Pu], cpus: &[Option<Vec<usize>>]) -> Option<Vec<u32>> {
    let sets: Vec<&Vec<usize>> = cpus.iter().map(Option::as_ref).collect::<Option<_>>()?;
    'levels: for level in [Level::L3Cache, Level::Numa, Level::Socket] {
        let mut ids = Vec::with_capacity(sets.len());
        for set in &sets {
            let of: BTreeSet<Option<u32>> = pus
                .iter()
                .filter(|p| set.contains(&p.cpu))
                .map(|p| p.id(level))
                .collect();
            match (of.len(), of.first()) {
                (1, Some(&Some(id))) => ids.push(id),
                _ => continue 'levels,
            }
        }
        let distinct: BTreeSet<u32> = ids.iter().copied().collect();
        if distinct.len() >= 2 {
            return Some(ids);
        }
    }
    None
}

/// Parses a kernel CPU list (`0-3,8,10-11`); `None` if malformed. An empty
/// string is an empty list.
pub fn parse_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                if a > b || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `sockets` sockets of `l3s` L3 caches of `cores` cores of `smt`
    /// threads; one NUMA node per socket. CPU numbers as Linux gives them:
    /// the first threads of every core, then the second ones.
    fn machine(sockets: u32, l3s: u32, cores: u32, smt: u32) -> Topology {
        let ncores = sockets * l3s * cores;
        let mut pus = Vec::new();
        for core in 0..ncores {
            for t in 0..smt {
                let l3 = core / cores;
                let socket = l3 / l3s;
                pus.push(Pu {
                    cpu: (t * ncores + core) as usize,
                    core,
                    l3: Some(l3),
                    numa: Some(socket),
                    socket: Some(socket),
                });
            }
        }
        Topology::new(pus).unwrap()
    }

    fn all(t: &Topology) -> Vec<usize> {
        t.pus().iter().map(|p| p.cpu).collect()
    }

    fn sets(m: &Mapping) -> Vec<Vec<usize>> {
        m.cpus.iter().map(|s| s.clone().unwrap()).collect()
    }

    #[test]
    fn map_by_core_bind_to_core() {
        let t = machine(2, 1, 2, 1);
        let m = t
            .map(&all(&t), 4, Level::Core, Some(Level::Core), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0], vec![1], vec![2], vec![3]]);
        assert_eq!(m.slots, 4);
        assert!(!m.oversubscribed);
        assert_eq!(m.domains, Some(vec![0, 0, 1, 1]));
    }

    #[test]
    fn map_by_socket_round_robin() {
        let t = machine(2, 1, 3, 1);
        let m = t
            .map(&all(&t), 4, Level::Socket, Some(Level::Core), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0], vec![3], vec![1], vec![4]]);
        let m = t
            .map(&all(&t), 3, Level::Socket, Some(Level::Socket), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0, 1, 2], vec![3, 4, 5], vec![0, 1, 2]]);
        assert_eq!(m.domains, Some(vec![0, 1, 0]));
    }

    #[test]
    fn hyperthreads() {
        // 2 cores x 2 threads: CPUs 0,2 on core 0 and 1,3 on core 1.
        let t = machine(1, 1, 2, 2);
        let m = t
            .map(&all(&t), 2, Level::Core, Some(Level::Core), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0, 2], vec![1, 3]]);
        assert_eq!(m.slots, 2);
        // By hardware thread: a core's threads first, as Open MPI.
        let m = t
            .map(&all(&t), 4, Level::HwThread, Some(Level::HwThread), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0], vec![2], vec![1], vec![3]]);
        assert_eq!(m.slots, 4);
        assert!(!m.oversubscribed);
        // Map by core, bind to a thread: the second round takes the
        // cores' second threads.
        let m = t
            .map(&all(&t), 4, Level::Core, Some(Level::HwThread), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0], vec![1], vec![2], vec![3]]);
        // Three ranks on two cores, bound by core: oversubscribed.
        let m = t
            .map(&all(&t), 3, Level::Core, Some(Level::Core), 1)
            .unwrap();
        assert!(m.oversubscribed);
        assert_eq!(m.domains, None); // one L3, one socket
    }

    #[test]
    fn l3_and_numa_levels() {
        // One socket, two L3s of two cores, one NUMA node.
        let t = machine(1, 2, 2, 1);
        let m = t
            .map(&all(&t), 4, Level::L3Cache, Some(Level::L3Cache), 1)
            .unwrap();
        assert_eq!(
            sets(&m),
            vec![vec![0, 1], vec![2, 3], vec![0, 1], vec![2, 3]]
        );
        assert_eq!(m.domains, Some(vec![0, 1, 0, 1]));
        let m = t
            .map(&all(&t), 2, Level::Numa, Some(Level::Numa), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0, 1, 2, 3]; 2]);
        // Bound wider than an L3: no domains the hierarchy could use.
        assert_eq!(m.domains, None);
        // Map by core, bind to the L3 that holds the core.
        let m = t
            .map(&all(&t), 3, Level::Core, Some(Level::L3Cache), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0, 1], vec![0, 1], vec![2, 3]]);
        assert_eq!(m.domains, Some(vec![0, 0, 1]));
    }

    #[test]
    fn restricted_cpu_set() {
        // Only CPUs 1, 2 and 5 of two sockets of three cores.
        let t = machine(2, 1, 3, 1);
        let m = t
            .map(&[1, 2, 5], 3, Level::Core, Some(Level::Core), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![1], vec![2], vec![5]]);
        assert_eq!(m.slots, 3);
        let m = t
            .map(&[1, 2, 5], 2, Level::Socket, Some(Level::Socket), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![1, 2], vec![5]]);
        let e = t
            .map(&[64], 1, Level::Core, Some(Level::Core), 1)
            .unwrap_err();
        assert!(e.0.contains("none of the CPUs"), "{e}");
    }

    #[test]
    fn oversubscription_wraps_round() {
        let t = machine(1, 1, 2, 1);
        let m = t
            .map(&all(&t), 5, Level::Core, Some(Level::Core), 1)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0], vec![1], vec![0], vec![1], vec![0]]);
        assert!(m.oversubscribed);
        // Not bound: never oversubscribed, no CPU sets.
        let m = t.map(&all(&t), 5, Level::Core, None, 1).unwrap();
        assert_eq!(m.cpus, vec![None; 5]);
        assert!(!m.oversubscribed);
        assert_eq!(m.domains, None);
    }

    #[test]
    fn processing_elements() {
        let t = machine(2, 1, 4, 1);
        let m = t
            .map(&all(&t), 4, Level::Socket, Some(Level::Core), 2)
            .unwrap();
        assert_eq!(
            sets(&m),
            vec![vec![0, 1], vec![4, 5], vec![2, 3], vec![6, 7]]
        );
        assert!(!m.oversubscribed);
        let m = t
            .map(&all(&t), 5, Level::Socket, Some(Level::Core), 2)
            .unwrap();
        assert!(m.oversubscribed);
        let e = t
            .map(&all(&t), 1, Level::Socket, Some(Level::Core), 5)
            .unwrap_err();
        assert!(e.0.contains("PE=5"), "{e}");
        // By core, PE cores each: runs of consecutive cores.
        let m = t
            .map(&all(&t), 3, Level::Core, Some(Level::Core), 3)
            .unwrap();
        assert_eq!(sets(&m), vec![vec![0, 1, 2], vec![3, 4, 5], vec![0, 1, 2]]);
        assert!(m.oversubscribed);
        let e = t
            .map(&all(&t), 1, Level::Core, Some(Level::Core), 9)
            .unwrap_err();
        assert!(e.0.contains("PE=9"), "{e}");
        let e = t
            .map(&all(&t), 1, Level::Socket, Some(Level::Socket), 2)
            .unwrap_err();
        assert!(e.0.contains("PE=2"), "{e}");
        let e = t
            .map(&all(&t), 1, Level::Core, Some(Level::Core), 0)
            .unwrap_err();
        assert!(e.0.contains("PE"), "{e}");
    }

    #[test]
    fn unknown_levels_are_errors() {
        let pus = (0..2)
            .map(|cpu| Pu {
                cpu,
                core: cpu as u32,
                l3: None,
                numa: Some(0),
                socket: Some(0),
            })
            .collect();
        let mut t = Topology::new(pus).unwrap();
        assert!(t.map(&[0, 1], 2, Level::Numa, Some(Level::Core), 1).is_ok());
        let e = t
            .map(&[0, 1], 2, Level::Core, Some(Level::L3Cache), 1)
            .unwrap_err();
        assert!(e.0.contains("L3 caches"), "{e}");
        t.source = Source::Sysfs;
        let e = t.map(&[0, 1], 2, Level::L3Cache, None, 1).unwrap_err();
        assert!(e.0.contains("feature `hwloc`"), "{e}");
    }

    #[test]
    fn bad_topologies() {
        assert!(Topology::new(Vec::new()).is_err());
        let pu = |cpu, socket| Pu {
            cpu,
            core: 0,
            l3: None,
            numa: None,
            socket: Some(socket),
        };
        assert!(Topology::new(vec![pu(0, 0), pu(0, 0)]).is_err());
        assert!(Topology::new(vec![pu(0, 0), pu(1, 1)]).is_err());
    }

    #[test]
    fn report_lines() {
        let t = machine(2, 1, 2, 2);
        // Core 1 = CPUs 1 and 5.
        assert_eq!(
            t.report_line(3, Some(&[1, 5])),
            "MCW rank 3 bound to socket 0[core 1[hwt 0,1]]: [../BB][../..] (L3 0, NUMA 0, socket 0)"
        );
        assert_eq!(
            t.report_line(0, Some(&[0, 2])),
            "MCW rank 0 bound to socket 0[core 0[hwt 0]], socket 1[core 2[hwt 0]]: \
             [B./..][B./..] (L3 0,1, NUMA 0,1, socket 0,1)"
        );
        assert_eq!(
            t.report_line(1, None),
            "MCW rank 1 is not bound (or bound to all available processors)"
        );
    }

    #[test]
    fn levels_by_name() {
        for l in Level::ALL {
            assert_eq!(Level::parse(l.name()), Some(l));
        }
        assert_eq!(Level::parse("package"), Some(Level::Socket));
        assert_eq!(Level::parse("board"), None);
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_list("0-3,8,10-11"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_list(""), Some(vec![]));
        assert_eq!(parse_list("3-1"), None);
        assert_eq!(parse_list("x"), None);
    }

    /// A fake `/sys` with two sockets, each its own L3 and NUMA node, of
    /// two cores with two threads (CPUs n and n+4 share a core).
    #[test]
    #[cfg_attr(miri, ignore)] // file system
    fn reads_sysfs() {
        let dir = std::env::temp_dir().join(format!("hmpi-sysfs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let root = dir.as_path();
        let w = |p: &str, s: &str| {
            let p = root.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, format!("{s}\n")).unwrap();
        };
        w("devices/system/cpu/online", "0-7");
        for cpu in 0..8 {
            let core = cpu % 4;
            let socket = core / 2;
            let d = format!("devices/system/cpu/cpu{cpu}");
            w(
                &format!("{d}/topology/core_cpus_list"),
                &format!("{core},{}", core + 4),
            );
            w(
                &format!("{d}/topology/physical_package_id"),
                &socket.to_string(),
            );
            w(&format!("{d}/cache/index3/level"), "3");
            w(&format!("{d}/cache/index3/type"), "Unified");
            let l3 = if socket == 0 { "0-1,4-5" } else { "2-3,6-7" };
            w(&format!("{d}/cache/index3/shared_cpu_list"), l3);
            w(&format!("{d}/cache/index1/level"), "1");
        }
        w("devices/system/node/node0/cpulist", "0-1,4-5");
        w("devices/system/node/node1/cpulist", "2-3,6-7");
        let t = Topology::from_sysfs(root).unwrap();
        assert_eq!(t.source(), Source::Sysfs);
        let order: Vec<usize> = all(&t);
        assert_eq!(order, vec![0, 4, 1, 5, 2, 6, 3, 7]);
        assert_eq!(
            t.pus()[3],
            Pu {
                cpu: 5,
                core: 1,
                l3: Some(0),
                numa: Some(0),
                socket: Some(0)
            }
        );
        let m = t.map(&order, 2, Level::Numa, Some(Level::Core), 1).unwrap();
        assert_eq!(sets(&m), vec![vec![0, 4], vec![2, 6]]);
        // Without cache entries the L3 level is unknown, and said so.
        for cpu in 0..8 {
            std::fs::remove_dir_all(root.join(format!("devices/system/cpu/cpu{cpu}/cache")))
                .unwrap();
        }
        let t = Topology::from_sysfs(root).unwrap();
        let e = t.map(&order, 2, Level::L3Cache, None, 1).unwrap_err();
        assert!(e.0.contains("feature `hwloc`"), "{e}");
        assert!(Topology::from_sysfs(&root.join("nothing")).is_err());
        std::fs::remove_dir_all(root).unwrap();
    }

    /// hwloc and `/sys` group this machine's CPUs the same way.
    #[test]
    #[cfg(feature = "hwloc")]
    #[cfg_attr(miri, ignore)] // foreign calls, file system
    fn hwloc_agrees_with_sysfs() {
        let hw = Topology::from_hwloc().unwrap();
        let sys = Topology::from_sysfs(Path::new("/sys")).unwrap();
        assert_eq!(hw.source(), Source::Hwloc);
        let partition = |t: &Topology, level: Level| -> Option<BTreeSet<Vec<usize>>> {
            let allowed = super::super::allowed_cpus();
            let pus: Vec<Pu> = t
                .pus()
                .iter()
                .filter(|p| allowed.contains(&p.cpu))
                .copied()
                .collect();
            if pus.iter().any(|p| p.id(level).is_none()) {
                return None;
            }
            let groups = groups(&pus, level).into_iter().map(|g| {
                let mut cpus: Vec<usize> = g.iter().map(|p| p.cpu).collect();
                cpus.sort_unstable();
                cpus
            });
            Some(groups.collect())
        };
        for level in [Level::HwThread, Level::Core, Level::L3Cache, Level::Socket] {
            match (partition(&hw, level), partition(&sys, level)) {
                (Some(a), Some(b)) => assert_eq!(a, b, "{level}"),
                // One source may not know the level (no L3 entry in /sys).
                _ => assert_ne!(level, Level::Core),
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore)] // file system, sched_getaffinity
    fn this_machine() {
        let t = Topology::detect().unwrap();
        let allowed = super::super::allowed_cpus();
        let m = t
            .map(
                &allowed,
                allowed.len() as u32,
                Level::Core,
                Some(Level::HwThread),
                1,
            )
            .unwrap();
        let mut got: Vec<usize> = m.cpus.iter().flat_map(|s| s.clone().unwrap()).collect();
        got.sort_unstable();
        assert_eq!(got, allowed, "one rank per allowed CPU");
        assert!(!m.oversubscribed);
    }
}
