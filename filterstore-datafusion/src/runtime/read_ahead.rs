//! A join's probe side read ahead of the join, for a filter of its keys
//! applied to the build side (a reverse filter, [`super::reverse`]).
//!
//! A hash join reads its build side whole before it polls its probe side.
//! The tap of a reverse filter sits on the probe side, and its filter is of
//! use only if it is complete before the build side has been read: so the
//! probe side is read ahead, on a task of its own, from the moment the
//! join's partition executes, into a buffer reserved in the task's memory
//! pool. When the next batch would take the buffer past its bound, or the
//! pool refuses it, reading ahead stops and `on_full` runs (the tap abandons
//! its filter, and the build side's places pass every row); the rows not
//! read yet are read when the join polls them. The join gets every row, in
//! the order the input gave them, and every error where it came.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::runtime::SpawnedTask;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::execution::{RecordBatchStream, SendableRecordBatchStream};
use futures::{FutureExt, Stream, StreamExt};
use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

/// What reading ahead left for the join.
struct Ahead {
    /// Batches, and an error of the input's last (reading ahead stops there).
    items: VecDeque<Result<RecordBatch>>,
    /// The rest of the input; `None` once it ended.
    rest: Option<SendableRecordBatchStream>,
    reservation: MemoryReservation,
}

enum State {
    Reading(SpawnedTask<Ahead>),
    Draining(Ahead),
    Done,
}

/// `input`, read ahead (see the module documentation).
pub(super) struct ReadAhead {
    schema: SchemaRef,
    state: State,
}

impl ReadAhead {
    /// Starts reading `input` ahead on a task of the current tokio runtime,
    /// holding at most `bound` bytes in `reservation`; `on_full` runs when
    /// the bound (or the pool) stops it before the input's end. The input
    /// back without a runtime to spawn on (the caller reads it as is).
    pub(super) fn start(
        input: SendableRecordBatchStream,
        reservation: MemoryReservation,
        bound: u64,
        on_full: impl FnOnce() + Send + 'static,
    ) -> std::result::Result<Self, SendableRecordBatchStream> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(input);
        }
        let schema = input.schema();
        let task = SpawnedTask::spawn(read(input, reservation, bound, on_full));
        Ok(ReadAhead {
            schema,
            state: State::Reading(task),
        })
    }
}

/// Reads `input` until its end, its first error, or the bound.
async fn read(
    mut input: SendableRecordBatchStream,
    reservation: MemoryReservation,
    bound: u64,
    on_full: impl FnOnce(),
) -> Ahead {
    let mut items = VecDeque::new();
    let rest = loop {
        match input.next().await {
            None => break None,
            Some(Err(e)) => {
                items.push_back(Err(e));
                break Some(input);
            }
            Some(Ok(batch)) => {
                let size = batch.get_array_memory_size();
                let fits = (reservation.size().saturating_add(size) as u64) <= bound
                    && reservation.try_grow(size).is_ok();
                // One batch past the bound is held unreserved until the
                // join takes it.
                items.push_back(Ok(batch));
                if !fits {
                    on_full();
                    break Some(input);
                }
            }
        }
    };
    Ahead {
        items,
        rest,
        reservation,
    }
}

impl Stream for ReadAhead {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match &mut self.state {
                State::Reading(task) => match futures::ready!(task.poll_unpin(cx)) {
                    Ok(ahead) => self.state = State::Draining(ahead),
                    Err(e) => {
                        self.state = State::Done;
                        let e = DataFusionError::Execution(format!("reading ahead failed: {e}"));
                        return Poll::Ready(Some(Err(e)));
                    }
                },
                State::Draining(ahead) => {
                    if let Some(item) = ahead.items.pop_front() {
                        if let Ok(batch) = &item {
                            let size = batch.get_array_memory_size();
                            let held = ahead.reservation.size();
                            ahead.reservation.shrink(size.min(held));
                        }
                        return Poll::Ready(Some(item));
                    }
                    let Some(rest) = ahead.rest.as_mut() else {
                        self.state = State::Done;
                        continue;
                    };
                    let item = futures::ready!(rest.poll_next_unpin(cx));
                    if item.is_none() {
                        // An input is not polled past its end.
                        self.state = State::Done;
                    }
                    return Poll::Ready(item);
                }
                State::Done => return Poll::Ready(None),
            }
        }
    }
}

impl RecordBatchStream for ReadAhead {
    fn schema(&self) -> SchemaRef {
        std::sync::Arc::clone(&self.schema)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::execution::memory_pool::{GreedyMemoryPool, MemoryConsumer, MemoryPool};
    use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn input(n: i64, fail_at: Option<i64>) -> SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, false)]));
        let s = Arc::clone(&schema);
        let batches = (0..n).map(move |i| {
            if Some(i) == fail_at {
                return Err(DataFusionError::Execution(format!("batch {i} failed")));
            }
            let col = Arc::new(Int64Array::from(vec![i; 100]));
            Ok(RecordBatch::try_new(Arc::clone(&s), vec![col]).unwrap())
        });
        Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter(batches),
        ))
    }

    /// Every batch and error, in order, whatever the bound; `on_full` runs
    /// exactly when the bound stopped the reading; the pool is left empty.
    #[tokio::test]
    async fn every_row_comes_in_order_and_the_bound_stops_the_reading() {
        let cases = [
            (10, 1 << 20, None),
            (10, 2000, None),
            (10, 0, Some(3)),
            (10, 1 << 20, Some(3)),
        ];
        for (n, bound, fail_at) in cases {
            let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1 << 30));
            let reservation = MemoryConsumer::new("t").register(&pool);
            let full = Arc::new(AtomicBool::new(false));
            let f = Arc::clone(&full);
            let on_full = move || f.store(true, Ordering::SeqCst);
            let Ok(ahead) = ReadAhead::start(input(n, fail_at), reservation, bound, on_full) else {
                panic!("no runtime");
            };
            let got: Vec<_> = ahead.collect().await;
            let mut want = 0;
            for item in &got {
                match item {
                    Ok(b) => {
                        let c = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                        assert_eq!(c.value(0), want);
                        want += 1;
                    }
                    Err(e) => {
                        assert_eq!(Some(want), fail_at, "{e}");
                        want += 1;
                    }
                }
            }
            let batch = futures::executor::block_on(input(1, None).next())
                .unwrap()
                .unwrap()
                .get_array_memory_size();
            // The bound stops it unless the error comes first.
            let fit = bound as usize / batch;
            let stopped = fit < n as usize && fail_at.is_none_or(|f| f as usize > fit);
            assert_eq!(got.len(), n as usize, "{n} {bound}");
            assert_eq!(
                full.load(Ordering::SeqCst),
                stopped,
                "{n} {bound} {fail_at:?}"
            );
            assert_eq!(pool.reserved(), 0);
        }
    }

    #[test]
    fn without_a_runtime_the_input_comes_back() {
        let pool: Arc<dyn MemoryPool> = Arc::new(GreedyMemoryPool::new(1 << 30));
        let reservation = MemoryConsumer::new("t").register(&pool);
        assert!(ReadAhead::start(input(1, None), reservation, 1 << 20, || ()).is_err());
    }
}
