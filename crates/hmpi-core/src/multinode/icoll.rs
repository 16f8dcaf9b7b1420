//! Nonblocking collectives of a [`SpanningCommunicator`]
//! (`MPI_Ibarrier`, `MPI_Iallreduce`, …) on a progress thread of the
//! communicator.
//!
//! The first nonblocking collective on a communicator duplicates it (a
//! collective step every member takes at the same point, since MPI has
//! every member start the communicator's collectives in the same order)
//! and starts one thread that owns the duplicate. Each nonblocking
//! collective hands that thread the blocking algorithm of
//! [`coll`](super::coll) with its own copy of the arguments; the thread
//! runs them one after another in the order they were started, which is
//! the same order on every member, so the k-th operation of each member
//! meets the k-th of every other. The request ([`CollRequest`]) completes
//! when the thread has run it; `test` looks without blocking, `wait`
//! blocks.
//!
//! Why a thread rather than a state machine driven by `test`: each phase
//! of the hierarchical algorithms is a collective of its own (hmpi's on
//! the node, MPI's among the leaders), and a member that only calls `test`
//! now and then must still let its peers through their phases. The thread
//! makes progress whether or not the caller tests, as `MPI_I*` are
//! expected to, and the duplicate keeps its traffic apart from the
//! caller's. The blocking phases among the leaders call MPI from that
//! thread while the caller's threads call MPI too, so this needs
//! `MPI_THREAD_MULTIPLE`; with less, starting a nonblocking collective is
//! refused with an [`Error::Arg`] naming the thread level.

use super::coll::Plain;
use super::comm::SpanningCommunicator;
use crate::error::{Error, Result};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::sync::Mutex;
use std::thread::JoinHandle;

/// One operation for the progress thread.
type Job = Box<dyn FnOnce(&SpanningCommunicator) + Send + 'static>;

/// A communicator's progress thread: the queue of operations and the
/// thread that runs them on the duplicate it owns.
pub(super) struct Progress {
    jobs: Mutex<Option<Sender<Job>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Progress {
    /// Starts the thread on `dup` (a duplicate of the communicator).
    fn start(dup: SpanningCommunicator) -> Result<Progress> {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("hmpi-coll".into())
            .spawn(move || {
                for job in rx {
                    job(&dup);
                }
            })
            .map_err(|e| Error::Internal(format!("cannot start a progress thread: {e}")))?;
        Ok(Progress {
            jobs: Mutex::new(Some(tx)),
            thread: Mutex::new(Some(thread)),
        })
    }

    fn submit(&self, job: Job) -> Result<()> {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        jobs.as_ref()
            .and_then(|tx| tx.send(job).ok())
            .ok_or_else(|| Error::Internal("the progress thread has ended".into()))
    }
}

impl Drop for Progress {
    /// Lets the thread finish what was started (every member started the
    /// same operations, so they complete) and joins it.
    fn drop(&mut self) {
        drop(self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take());
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// A nonblocking collective in progress; its result once complete.
/// Dropping it without waiting leaves the operation to finish on the
/// progress thread (the other members still need this member's part).
#[derive(Debug)]
pub struct CollRequest<T> {
    rx: Receiver<Result<T>>,
    done: Option<Result<T>>,
}

impl<T> CollRequest<T> {
    /// Whether the operation has completed (`MPI_Test`); never blocks.
    pub fn test(&mut self) -> bool {
        if self.done.is_none() {
            match self.rx.try_recv() {
                Ok(r) => self.done = Some(r),
                Err(TryRecvError::Empty) => {}
                Err(TryRecvError::Disconnected) => {
                    self.done = Some(Err(Error::Internal(
                        "a nonblocking collective was lost with its progress thread".into(),
                    )))
                }
            }
        }
        self.done.is_some()
    }

    /// Whether a [`test`](Self::test) has seen the operation complete
    /// (looks at nothing else).
    pub(crate) fn is_done(&self) -> bool {
        self.done.is_some()
    }

    /// Blocks until the operation has completed and returns its result
    /// (`MPI_Wait`).
    pub fn wait(mut self) -> Result<T> {
        if let Some(r) = self.done.take() {
            return r;
        }
        self.rx.recv().unwrap_or_else(|_| {
            Err(Error::Internal(
                "a nonblocking collective was lost with its progress thread".into(),
            ))
        })
    }
}

impl SpanningCommunicator {
    /// Hands `f` to the communicator's progress thread (started, with its
    /// duplicate, by the first call). The typed API's `immediate_*`
    /// collectives start theirs here too (`multinode::typed::start`).
    pub(crate) fn start_coll<R, F>(&self, f: F) -> Result<CollRequest<R>>
    where
        R: Send + 'static,
        F: FnOnce(&SpanningCommunicator) -> Result<R> + Send + 'static,
    {
        self.active()?;
        if !super::mpi::thread_multiple() {
            return Err(Error::Arg {
                reason: "nonblocking collectives across nodes need MPI_THREAD_MULTIPLE, \
                         which this MPI did not provide"
                    .into(),
            });
        }
        let progress = match self.inner.progress.get() {
            Some(p) => p,
            None => {
                let p = Progress::start(self.duplicate()?)?;
                // Only this communicator's collective calls reach here,
                // one at a time (collectives on one communicator are not
                // started concurrently), so the cell is still empty.
                let _ = self.inner.progress.set(p);
                self.inner
                    .progress
                    .get()
                    .ok_or_else(|| Error::Internal("progress thread".into()))?
            }
        };
        let (tx, rx) = mpsc::channel();
        progress.submit(Box::new(move |c: &SpanningCommunicator| {
            let _ = tx.send(f(c));
        }))?;
        Ok(CollRequest { rx, done: None })
    }

    /// [`barrier`](Self::barrier), nonblocking (`MPI_Ibarrier`).
    pub fn ibarrier(&self) -> Result<CollRequest<()>> {
        self.start_coll(|c| c.barrier())
    }

    /// [`bcast_bytes`](Self::bcast_bytes), nonblocking (`MPI_Ibcast`): the
    /// root's `data` on every member.
    pub fn ibcast_bytes(&self, data: Vec<u8>, root: i32) -> Result<CollRequest<Vec<u8>>> {
        self.check_root(root)?;
        self.start_coll(move |c| {
            let mut data = data;
            c.bcast_bytes(&mut data, root)?;
            Ok(data)
        })
    }

    /// [`allgatherv_bytes`](Self::allgatherv_bytes), nonblocking.
    pub fn iallgatherv_bytes(&self, mine: Vec<u8>) -> Result<CollRequest<Vec<Vec<u8>>>> {
        self.start_coll(move |c| c.allgatherv_bytes(&mine))
    }

    /// [`gatherv_bytes`](Self::gatherv_bytes), nonblocking.
    pub fn igatherv_bytes(
        &self,
        mine: Vec<u8>,
        root: i32,
    ) -> Result<CollRequest<Option<Vec<Vec<u8>>>>> {
        self.check_root(root)?;
        self.start_coll(move |c| c.gatherv_bytes(&mine, root))
    }

    /// [`scatterv_bytes`](Self::scatterv_bytes), nonblocking.
    pub fn iscatterv_bytes(
        &self,
        pieces: Option<Vec<Vec<u8>>>,
        root: i32,
    ) -> Result<CollRequest<Vec<u8>>> {
        self.check_root(root)?;
        self.start_coll(move |c| c.scatterv_bytes(pieces.as_deref(), root))
    }

    /// [`alltoallv_bytes`](Self::alltoallv_bytes), nonblocking.
    pub fn ialltoallv_bytes(&self, pieces: Vec<Vec<u8>>) -> Result<CollRequest<Vec<Vec<u8>>>> {
        self.start_coll(move |c| c.alltoallv_bytes(&pieces))
    }

    /// [`allreduce`](Self::allreduce), nonblocking (`MPI_Iallreduce`).
    pub fn iallreduce<T: Plain + Send>(
        &self,
        send: Vec<T>,
        op: impl Fn(T, T) -> T + Send + 'static,
    ) -> Result<CollRequest<Vec<T>>> {
        self.start_coll(move |c| c.allreduce(&send, op))
    }

    /// [`reduce`](Self::reduce), nonblocking (`MPI_Ireduce`).
    pub fn ireduce<T: Plain + Send>(
        &self,
        send: Vec<T>,
        op: impl Fn(T, T) -> T + Send + 'static,
        root: i32,
    ) -> Result<CollRequest<Option<Vec<T>>>> {
        self.check_root(root)?;
        self.start_coll(move |c| c.reduce(&send, op, root))
    }

    /// [`all_gather`](Self::all_gather), nonblocking (`MPI_Iallgather`).
    pub fn iall_gather<T: Plain + Send>(&self, mine: Vec<T>) -> Result<CollRequest<Vec<T>>> {
        self.start_coll(move |c| c.all_gather(&mine))
    }

    /// [`gather`](Self::gather), nonblocking (`MPI_Igather`).
    pub fn igather<T: Plain + Send>(
        &self,
        mine: Vec<T>,
        root: i32,
    ) -> Result<CollRequest<Option<Vec<T>>>> {
        self.check_root(root)?;
        self.start_coll(move |c| c.gather(&mine, root))
    }

    /// [`scatter`](Self::scatter), nonblocking (`MPI_Iscatter`).
    pub fn iscatter<T: Plain + Send>(
        &self,
        send: Option<Vec<T>>,
        count: usize,
        root: i32,
    ) -> Result<CollRequest<Vec<T>>> {
        self.check_root(root)?;
        self.start_coll(move |c| c.scatter(send.as_deref(), count, root))
    }

    /// [`all_to_all`](Self::all_to_all), nonblocking (`MPI_Ialltoall`).
    pub fn iall_to_all<T: Plain + Send>(
        &self,
        send: Vec<T>,
        count: usize,
    ) -> Result<CollRequest<Vec<T>>> {
        self.start_coll(move |c| c.all_to_all(&send, count))
    }

    /// [`scan`](Self::scan), nonblocking (`MPI_Iscan`).
    pub fn iscan<T: Plain + Send>(
        &self,
        send: Vec<T>,
        op: impl Fn(T, T) -> T + Send + 'static,
    ) -> Result<CollRequest<Vec<T>>> {
        self.start_coll(move |c| c.scan(&send, op))
    }

    /// [`exscan`](Self::exscan), nonblocking (`MPI_Iexscan`).
    pub fn iexscan<T: Plain + Send>(
        &self,
        send: Vec<T>,
        op: impl Fn(T, T) -> T + Send + 'static,
    ) -> Result<CollRequest<Option<Vec<T>>>> {
        self.start_coll(move |c| c.exscan(&send, op))
    }

    /// [`reduce_scatter`](Self::reduce_scatter), nonblocking
    /// (`MPI_Ireduce_scatter`).
    pub fn ireduce_scatter<T: Plain + Send>(
        &self,
        send: Vec<T>,
        counts: Vec<usize>,
        op: impl Fn(T, T) -> T + Send + 'static,
    ) -> Result<CollRequest<Vec<T>>> {
        self.start_coll(move |c| c.reduce_scatter(&send, &counts, op))
    }

    /// [`reduce_scatter_block`](Self::reduce_scatter_block), nonblocking
    /// (`MPI_Ireduce_scatter_block`).
    pub fn ireduce_scatter_block<T: Plain + Send>(
        &self,
        send: Vec<T>,
        count: usize,
        op: impl Fn(T, T) -> T + Send + 'static,
    ) -> Result<CollRequest<Vec<T>>> {
        self.start_coll(move |c| c.reduce_scatter_block(&send, count, op))
    }
}
