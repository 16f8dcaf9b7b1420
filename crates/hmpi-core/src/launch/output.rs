//! The ranks' piped output: one thread per stream that either tags every
//! line with the rank (`[2] hello`) and forwards it, or collects the stream
//! in memory.
//!
//! A tagged line is written with one `write(2)` call, so lines of different
//! ranks do not interleave (a pipe guarantees it up to `PIPE_BUF` bytes, a
//! terminal or file in practice); so are the launcher's own messages
//! ([`write_stderr_line`]), which `eprintln!` would write piece by piece
//! (standard error is unbuffered), letting a rank's line land in the middle
//! of one. A line a rank had not finished when it ended (it was terminated
//! while writing it) is written with the newline it lacks; the runtime's
//! fatal messages are written with one call each, so terminating a rank
//! cannot cut one. A thread ends at end of file, or when the
//! launcher stops it: after the job, descendants that escaped their rank's
//! process group may hold a pipe open, and the launcher must not wait for
//! them forever.
//!
//! # Example
//! ```ignore
//! let mut pumps = Pumps::new()?;
//! pumps.spawn(rank, Stream::Stdout, child_stdout.into(), Sink::Capture)?;
//! // … the job runs and ends …
//! for (rank, stream, bytes) in pumps.finish(Duration::from_secs(1)) { /* … */ }
//! ```

use nix::errno::Errno;
use nix::fcntl::{fcntl, FcntlArg, OFlag};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest line kept back waiting for its newline; longer ones are cut.
const MAX_LINE: usize = 64 << 10;

/// Which of a rank's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    Stdout,
    Stderr,
}

/// Where a stream goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sink {
    /// Prefix each line with `[rank] ` and write it to the launcher's
    /// stream of the same kind.
    Tag,
    /// Keep everything in memory for the report.
    Capture,
}

/// The pump threads of one job.
pub(crate) struct Pumps {
    threads: Vec<(u32, Stream, JoinHandle<Vec<u8>>)>,
    done_tx: Sender<()>,
    done_rx: Receiver<()>,
    /// Readable once the launcher asks the threads to stop.
    stop_read: OwnedFd,
    stop_write: OwnedFd,
    finished: bool,
}

/// Sends on the job's channel when a pump ends, even by panic.
struct DoneGuard(Sender<()>);

impl Drop for DoneGuard {
    fn drop(&mut self) {
        let _ = self.0.send(());
    }
}

impl Pumps {
    pub(crate) fn new() -> io::Result<Pumps> {
        let (stop_read, stop_write) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
        let (done_tx, done_rx) = channel();
        Ok(Pumps {
            threads: Vec::new(),
            done_tx,
            done_rx,
            stop_read,
            stop_write,
            finished: false,
        })
    }

    /// Starts a thread that pumps `fd` (a rank's stream) into `sink`.
    pub(crate) fn spawn(
        &mut self,
        rank: u32,
        stream: Stream,
        fd: OwnedFd,
        sink: Sink,
    ) -> io::Result<()> {
        set_nonblocking(fd.as_fd())?;
        let stop = self.stop_read.as_raw_fd();
        let done = DoneGuard(self.done_tx.clone());
        let name = format!(
            "hmpirun-{rank}-{}",
            if stream == Stream::Stdout {
                "out"
            } else {
                "err"
            }
        );
        let handle = std::thread::Builder::new().name(name).spawn(move || {
            let _done = done;
            pump(fd, stop, rank, stream, sink)
        })?;
        self.threads.push((rank, stream, handle));
        Ok(())
    }

    /// Waits up to `grace` for every stream to reach end of file, then stops
    /// the remaining threads and joins them all. Returns each stream's
    /// captured bytes (empty unless its sink was [`Sink::Capture`]).
    pub(crate) fn finish(&mut self, grace: Duration) -> Vec<(u32, Stream, Vec<u8>)> {
        if self.finished {
            return Vec::new();
        }
        self.finished = true;
        let deadline = Instant::now() + grace;
        let mut done = 0;
        while done < self.threads.len() {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.done_rx.recv_timeout(left) {
                Ok(()) => done += 1,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            }
        }
        if done < self.threads.len() {
            // The byte is never read, so the stop pipe stays readable for
            // every thread.
            write_all(self.stop_write.as_fd(), b"x");
        }
        self.threads
            .drain(..)
            .map(|(rank, stream, handle)| (rank, stream, handle.join().unwrap_or_default()))
            .collect()
    }
}

impl Drop for Pumps {
    fn drop(&mut self) {
        // The threads use `stop_read`; they must be gone before it closes.
        self.finish(Duration::ZERO);
    }
}

fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    let flags = OFlag::from_bits_retain(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// Writes all of `buf` to `fd`, in one call unless the kernel takes less.
/// Errors (a closed terminal, a full disk) drop the output: the job goes on.
fn write_all(fd: BorrowedFd<'_>, mut buf: &[u8]) {
    while !buf.is_empty() {
        match nix::unistd::write(fd, buf) {
            Ok(n) if n > 0 => buf = &buf[n..],
            Err(Errno::EINTR) => {}
            Err(Errno::EAGAIN) => {
                // Our stdout was left non-blocking by someone; wait for room.
                let mut pfd = [PollFd::new(fd, PollFlags::POLLOUT)];
                let _ = poll(&mut pfd, PollTimeout::from(100u16));
            }
            _ => return,
        }
    }
}

/// Writes `line` (with its newline) to the launcher's standard error with
/// one `write(2)` call, so that the rank's lines, forwarded by the pump
/// threads at the same time, cannot land in the middle of it.
pub(crate) fn write_stderr_line(line: &str) {
    write_all(io::stderr().as_fd(), line.as_bytes());
}

/// Tags complete lines of `pending` and writes them; with `all`, also the
/// incomplete rest (a newline is added).
fn emit_lines(pending: &mut Vec<u8>, prefix: &[u8], out: BorrowedFd<'_>, all: bool) {
    let mut start = 0;
    let mut line = Vec::new();
    loop {
        let rest = &pending[start..];
        let end = match rest.iter().position(|&b| b == b'\n') {
            Some(i) => i + 1,
            None if rest.len() >= MAX_LINE || (all && !rest.is_empty()) => rest.len(),
            None => break,
        };
        line.clear();
        line.extend_from_slice(prefix);
        line.extend_from_slice(&rest[..end]);
        if line.last() != Some(&b'\n') {
            line.push(b'\n');
        }
        write_all(out, &line);
        start += end;
    }
    pending.drain(..start);
}

/// The body of a pump thread. Returns the captured bytes.
fn pump(fd: OwnedFd, stop: RawFd, rank: u32, stream: Stream, sink: Sink) -> Vec<u8> {
    let stdout = io::stdout();
    let stderr = io::stderr();
    let out = match stream {
        Stream::Stdout => stdout.as_fd(),
        Stream::Stderr => stderr.as_fd(),
    };
    // SAFETY: `stop` is the read end of the job's stop pipe, which stays
    // open until this thread is joined (`Pumps::finish`).
    let stop = unsafe { BorrowedFd::borrow_raw(stop) };
    let prefix = format!("[{rank}] ").into_bytes();
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 16 << 10];
    let mut stopping = false;
    loop {
        // Read whatever is there.
        match nix::unistd::read(&fd, &mut buf) {
            Ok(0) => break, // end of file
            Ok(n) => {
                pending.extend_from_slice(&buf[..n]);
                if let Sink::Tag = sink {
                    emit_lines(&mut pending, &prefix, out, false);
                }
                continue;
            }
            Err(Errno::EINTR) => continue,
            Err(Errno::EAGAIN) if !stopping => {}
            Err(_) => break, // stopped and drained, or a read error
        }
        let mut pfds = [
            PollFd::new(fd.as_fd(), PollFlags::POLLIN),
            PollFd::new(stop, PollFlags::POLLIN),
        ];
        let _ = poll(&mut pfds, PollTimeout::NONE);
        if pfds[1].any().unwrap_or(false) {
            stopping = true; // one last read, then out
        }
    }
    match sink {
        Sink::Tag => {
            emit_lines(&mut pending, &prefix, out, true);
            Vec::new()
        }
        Sink::Capture => pending,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore)] // reads through std::fs::File, whose statx Miri's isolation refuses
    fn lines_are_tagged_and_completed() {
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        let mut pending = b"one\ntwo\nthr".to_vec();
        emit_lines(&mut pending, b"[7] ", w.as_fd(), false);
        assert_eq!(pending, b"thr");
        emit_lines(&mut pending, b"[7] ", w.as_fd(), true);
        assert!(pending.is_empty());
        drop(w);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::from(r), &mut got).unwrap();
        assert_eq!(got, b"[7] one\n[7] two\n[7] thr\n");
    }

    #[test]
    fn capture_until_eof_and_stop() {
        let mut pumps = Pumps::new().unwrap();
        let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        pumps.spawn(3, Stream::Stderr, r, Sink::Capture).unwrap();
        write_all(w.as_fd(), b"partial");
        // The writer stays open: `finish` must stop the thread after the
        // grace period and still return what was read.
        let t = Instant::now();
        let got = pumps.finish(Duration::from_millis(50));
        assert!(t.elapsed() < Duration::from_secs(5));
        assert_eq!(got, vec![(3, Stream::Stderr, b"partial".to_vec())]);
        drop(w);
    }
}
