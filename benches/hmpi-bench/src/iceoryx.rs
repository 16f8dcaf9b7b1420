//! The zero-copy peer of the `opi` workload: iceoryx2's publish-subscribe
//! (feature `iceoryx2`), measured in the same two rank processes as hmpi's
//! give/take and interleaved with it repetition by repetition, so both see
//! the same machine.
//!
//! The loop is the one iceoryx2's own publish-subscribe benchmark times:
//! two services (`a2b`, `b2a`) of `[u8]` slices with one publisher and
//! one subscriber each, a subscriber buffer of one sample and no history;
//! participant A sends a loaned sample, loans the next one and polls for
//! B's reply; B loans a sample, polls for A's, and sends. The payload is
//! never written or read (the samples are loaned uninitialised), as in
//! `hmpi-opi`. One-way latency = A's time for the round trips / (2 ×
//! round trips). Participants are processes here (the ranks, bound to
//! cores) where iceoryx2's benchmark uses two pinned threads: the shared
//! memory and the cache-line traffic are the same.

use iceoryx2::port::publisher::Publisher;
use iceoryx2::port::subscriber::Subscriber;
use iceoryx2::prelude::*;
use iceoryx2::service::port_factory::publish_subscribe::PortFactory;
use std::time::Instant;

type Service = ipc::Service;

/// One rank's side of the two services.
pub struct Peer {
    _node: Node<Service>,
    a2b: PortFactory<Service, [u8], ()>,
    b2a: PortFactory<Service, [u8], ()>,
    leader: bool,
}

/// A publisher and a subscriber for one payload size.
pub struct Ports {
    publisher: Publisher<Service, [u8], ()>,
    subscriber: Subscriber<Service, [u8], ()>,
    leader: bool,
}

impl Peer {
    /// Opens (or creates) the job's two services. `job` names them: both
    /// ranks must pass the same string, unique on the machine.
    pub fn new(job: &str, leader: bool) -> Result<Peer, String> {
        set_log_level(LogLevel::Error);
        let node = NodeBuilder::new()
            .create::<Service>()
            .map_err(|e| format!("iceoryx2 node: {e:?}"))?;
        let service = |dir: &str| {
            let name = ServiceName::new(&format!("hmpi-bench/{job}/{dir}"))
                .map_err(|e| format!("iceoryx2 service name: {e:?}"))?;
            node.service_builder(&name)
                .publish_subscribe::<[u8]>()
                .max_publishers(1)
                .max_subscribers(1)
                .history_size(0)
                .subscriber_max_buffer_size(1)
                .enable_safe_overflow(true)
                .open_or_create()
                .map_err(|e| format!("iceoryx2 service {dir}: {e:?}"))
        };
        let a2b = service("a2b")?;
        let b2a = service("b2a")?;
        Ok(Peer {
            _node: node,
            a2b,
            b2a,
            leader,
        })
    }

    /// This rank's publisher (A publishes on `a2b`) and subscriber for
    /// payloads of `size` bytes. Both ranks must have made theirs before
    /// either runs [`Ports::one_way_ns`] (a barrier between).
    pub fn ports(&self, size: usize) -> Result<Ports, String> {
        let (out, inc) = if self.leader {
            (&self.a2b, &self.b2a)
        } else {
            (&self.b2a, &self.a2b)
        };
        let publisher = out
            .publisher_builder()
            .initial_max_slice_len(size.max(1))
            .create()
            .map_err(|e| format!("iceoryx2 publisher of {size} B: {e:?}"))?;
        let subscriber = inc
            .subscriber_builder()
            .create()
            .map_err(|e| format!("iceoryx2 subscriber: {e:?}"))?;
        Ok(Ports {
            publisher,
            subscriber,
            leader: self.leader,
        })
    }
}

impl Ports {
    fn loan(
        &self,
        size: usize,
    ) -> Result<iceoryx2::sample_mut::SampleMut<Service, [u8], ()>, String> {
        let s = self
            .publisher
            .loan_slice_uninit(size)
            .map_err(|e| format!("iceoryx2 loan of {size} B: {e:?}"))?;
        // SAFETY: the payload is never read, here or by the subscriber
        // (the benchmark moves samples, not bytes); `[u8]` has no invalid
        // bit patterns.
        Ok(unsafe { s.assume_init() })
    }

    fn wait_sample(&self) -> Result<(), String> {
        loop {
            match self.subscriber.receive() {
                Ok(Some(_sample)) => return Ok(()),
                Ok(None) => std::hint::spin_loop(),
                Err(e) => return Err(format!("iceoryx2 receive: {e:?}")),
            }
        }
    }

    /// Runs `iters` round trips of `size`-byte samples with the other
    /// rank (which calls this too) and returns the leader's one-way
    /// latency in nanoseconds (the follower's return value is its own
    /// view and is not reported).
    pub fn one_way_ns(&self, size: usize, iters: usize) -> Result<f64, String> {
        let send = |s: iceoryx2::sample_mut::SampleMut<Service, [u8], ()>| {
            s.send()
                .map(drop)
                .map_err(|e| format!("iceoryx2 send: {e:?}"))
        };
        let start = Instant::now();
        if self.leader {
            let mut sample = self.loan(size)?;
            for _ in 0..iters {
                send(sample)?;
                sample = self.loan(size)?;
                self.wait_sample()?;
            }
        } else {
            for _ in 0..iters {
                let sample = self.loan(size)?;
                self.wait_sample()?;
                send(sample)?;
            }
        }
        Ok(start.elapsed().as_nanos() as f64 / (2 * iters.max(1)) as f64)
    }
}
