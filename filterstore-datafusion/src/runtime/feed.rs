//! One probe partition's stream: it reads its input from the first poll,
//! whether or not the filter has come.
//!
//! Rows read before the filter wait in a bounded buffer
//! ([`ProbePolicy::buffer_bytes`](super::probe::ProbePolicy::buffer_bytes)),
//! reserved in the task's DataFusion memory pool, and are checked against
//! the filter when it comes. When the buffer is full (its bound, or the
//! pool refused it) or the deadline passes first, the held rows pass
//! unfiltered, and rows after the filter's arrival are checked. Only a
//! partition whose input has ended waits with nothing to do, at most to the
//! deadline (`wait_time` counts that time alone).
//!
//! Metrics: `rows_buffered` (rows read before the filter came, held, then
//! checked or passed), `buffer_full` (times a full buffer let its rows pass
//! unfiltered), with `deadline_missed` and `rows_unfiltered` from
//! [`super::probe`].

use super::probe::{Probe, ProbeRun};
use datafusion::arrow::array::RecordBatch;
use datafusion::error::Result;
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::metrics::Count;
use futures::StreamExt;
use std::collections::VecDeque;
use std::sync::Arc;

/// A probe partition's input, its filtering and the rows held for the
/// filter.
pub(super) struct Feed {
    pub(super) input: SendableRecordBatchStream,
    pub(super) run: Arc<ProbeRun>,
    pub(super) probe: Probe,
    /// Rows read before the filter came, oldest first, each with the
    /// bytes it holds in `reservation` (0 for the one that did not fit).
    pub(super) held: VecDeque<(RecordBatch, usize)>,
    /// The held batches' memory, in the task's pool.
    pub(super) reservation: MemoryReservation,
    /// The input has ended.
    pub(super) input_done: bool,
    pub(super) rows_buffered: Count,
    pub(super) buffer_full: Count,
}

/// How a wait for the filter ended.
enum Settled {
    /// The filter (or "pass every row") came.
    Arrived(super::probe::Arrival),
    /// The deadline passed first.
    Deadline,
    /// The buffer could hold no more.
    Full,
}

impl Feed {
    /// The partition's next batch, filtered as far as the filter allows.
    pub(super) async fn next_batch(&mut self) -> Option<Result<RecordBatch>> {
        if self.probe.is_waiting()
            && let Err(e) = self.settle().await
        {
            return Some(Err(e));
        }
        let batch = match self.held.pop_front() {
            Some((b, reserved)) => {
                self.reservation.shrink(reserved);
                b
            }
            None if self.input_done => return self.end().await,
            None => match self.input.next().await {
                Some(Ok(b)) => b,
                Some(Err(e)) => return Some(Err(e)),
                None => {
                    self.input_done = true;
                    return self.end().await;
                }
            },
        };
        self.probe.poll_late(&self.run);
        #[cfg(feature = "test-hooks")]
        {
            let delay = super::hooks::of(self.probe.filter_id).probe_batch_delay;
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
        }
        Some(Ok(self.probe.filter(batch)))
    }

    /// The end of the partition's stream, once the task's acknowledgement
    /// of the filter it used is in (see [`super::probe::Acked`]).
    async fn end(&mut self) -> Option<Result<RecordBatch>> {
        if let Some(acked) = self.probe.acked.take() {
            acked.await;
        }
        None
    }

    /// Reads the input into the buffer until the filter comes, the
    /// deadline passes or the buffer is full; then waits for the filter
    /// alone (idle, counted in `wait_time`) if the input has ended first.
    async fn settle(&mut self) -> Result<()> {
        let deadline = tokio::time::Instant::from_std(self.run.deadline());
        #[cfg(feature = "test-hooks")]
        let _waiting = super::probe::Waiting::enter(self.probe.filter_id);
        #[cfg(feature = "test-hooks")]
        if super::hooks::of(self.probe.filter_id).probe_waits_first {
            let _ = tokio::time::timeout_at(deadline, self.run.arrival.clone()).await;
        }
        let settled = loop {
            if self.input_done {
                let timer = self.probe.metrics.wait.timer();
                let arrived = tokio::time::timeout_at(deadline, self.run.arrival.clone()).await;
                timer.done();
                break arrived.map_or(Settled::Deadline, Settled::Arrived);
            }
            tokio::select! {
                biased;
                a = self.run.arrival.clone() => break Settled::Arrived(a),
                () = tokio::time::sleep_until(deadline) => break Settled::Deadline,
                next = self.input.next() => match next {
                    None => self.input_done = true,
                    Some(Err(e)) => return Err(e),
                    Some(Ok(b)) => {
                        if !self.hold(b) {
                            break Settled::Full;
                        }
                    }
                },
            }
        };
        match settled {
            Settled::Arrived(a) => self.probe.arrive(a),
            Settled::Deadline => self.probe.miss_deadline(),
            Settled::Full => {
                self.buffer_full.add(1);
                self.probe.pass_until_arrival();
            }
        }
        Ok(())
    }

    /// Holds `batch` (already read: it is held whatever the answer);
    /// whether the buffer had room for it, within its bound and the pool.
    fn hold(&mut self, batch: RecordBatch) -> bool {
        let size = batch.get_array_memory_size();
        let bound = usize::try_from(self.probe.policy.buffer_bytes).unwrap_or(usize::MAX);
        let fits = self.reservation.size().saturating_add(size) <= bound
            && self.reservation.try_grow(size).is_ok();
        self.rows_buffered.add(batch.num_rows());
        self.held.push_back((batch, if fits { size } else { 0 }));
        fits
    }
}
