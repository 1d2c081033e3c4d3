//! The CPU pool's one rule for what its jobs share: a value built on first use, which jobs of
//! the pool may wait for, is never built by splitting work over the pool from inside its
//! cell. A thread of the pool that waits for a piece of split work takes up other jobs, and
//! one of them may be waiting, further up the same stack, for the value it buries (#36: eval
//! stalled for good on a fresh cache).

use std::sync::OnceLock;

/// Whether the caller is a thread of the CPU pool: work that other jobs may wait for is then
/// done by the caller alone, never split over the pool.
pub(crate) fn on_pool_thread() -> bool {
    rayon::current_thread_index().is_some()
}

/// The value in `cell`, built by `build` if nobody has yet. A thread of the pool builds in the
/// cell (and `build` must not split its work there: [`on_pool_thread`]); any other thread
/// builds outside it, with the whole pool, where no job waits for pool work. Two threads
/// outside the pool may both build; the first value is kept.
pub(crate) fn get_or_build<T>(cell: &OnceLock<T>, build: impl Fn() -> T) -> &T {
    if let Some(built) = cell.get() {
        return built;
    }
    if !on_pool_thread() {
        let _ = cell.set(build());
    }
    cell.get_or_init(build)
}
