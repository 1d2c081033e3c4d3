//! Requests that wait for the model at the same time run together, as llama-server's parallel
//! slots do: each reads its prompt into a sequence of its own (reusing what an idle sequence
//! holds of it), then every live sequence decodes its next token in one step whose matrix
//! products take all their rows at once ([`Transformer::step`]), reading each weight once for
//! all of them. Each sequence has its own cache, sampler, stop rules and cancel flag; one that
//! ends leaves the batch and the others go on. The samples of one request (`n`) share its
//! prompt: it is read once and copied into each sample's sequence.
//!
//! A thread runs the batch while there is work ([`submit`] starts it) and ends when none is
//! left; between such runs the idle sequences stay with the model as its prompt cache.
//!
//! [`Transformer::step`]: super::transformer::Transformer::step

use std::collections::VecDeque;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use candle_core::Tensor;
use candle_transformers::generation::LogitsProcessor;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::oneshot;

use super::error::GenerationError;
use super::transformer::Sequence;
use super::vocabulary::Vocabulary;
use super::{LocalModel, header, one_line};
use crate::model::Delta;

/// The most sequences a model holds at once: those decoding (the rows of a step) and those
/// kept idle for the prefix a later prompt may share. Eight covers the UI's five cards, with
/// room for samples, in one batch. Wider batches would not decode faster: on the busy 2-core
/// machine of BENCHMARKS.md a step of 8 rows took 7.9 times one row's time (the quantized
/// products were bound by arithmetic there, not by reading the weights), while each sequence
/// may hold a whole context of keys and values (45 KiB a position for SmolLM2-135M: 45 to 90
/// MiB for a 1,000-token prompt as its buffer grows, 360 MiB at its full 8,192).
pub const MAX_SEQUENCES: usize = 8;

/// A request as the model runs it.
pub struct Job {
    /// The token ids the model reads, fitted to its context.
    pub prompt: Vec<u32>,
    pub max_tokens: usize,
    pub samples: usize,
    /// Sample `i` draws with seed `seed + i`, so that seeded samples still differ.
    pub seed: u64,
    /// `None`: greedy.
    pub temperature: Option<f64>,
    pub stop: Arc<[String]>,
    /// Set when the request's future is dropped: the job leaves at the next step,
    /// unanswered.
    pub cancel: Arc<AtomicBool>,
    pub deltas: Option<UnboundedSender<Delta>>,
    pub reply: oneshot::Sender<Answer>,
}

/// A job's texts, one per sample, or why it failed. A cancelled job gets no answer: nobody
/// waits for it.
pub type Answer = Result<Vec<String>, GenerationError>;

/// What a model's requests share: the jobs waiting for the thread that runs them, and the
/// sequences it keeps between runs.
#[derive(Default)]
pub struct Batch {
    shared: Mutex<Shared>,
    prompt_tokens: AtomicU64,
    steps: AtomicU64,
    tokens: AtomicU64,
}

#[derive(Default)]
struct Shared {
    waiting: Vec<Job>,
    /// Whether a thread runs the batch.
    running: bool,
    /// Sequences no job uses, least recently used first, while no thread runs.
    idle: Vec<Sequence>,
}

/// What a model computed since it loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// Prompt tokens read (those reused from a held sequence are not).
    pub prompt_tokens: u64,
    /// Batch steps.
    pub steps: u64,
    /// Tokens the steps decoded: the rows of all of them.
    pub tokens: u64,
}

impl Batch {
    pub fn decoded(&self) -> Decoded {
        Decoded {
            prompt_tokens: self.prompt_tokens.load(Ordering::Relaxed),
            steps: self.steps.load(Ordering::Relaxed),
            tokens: self.tokens.load(Ordering::Relaxed),
        }
    }

    fn shared(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Hands `job` to `model`'s batch, starting the thread that runs it unless one does.
pub fn submit(model: &Arc<LocalModel>, job: Job) {
    let mut shared = model.batch.shared();
    shared.waiting.push(job);
    if shared.running {
        return;
    }
    shared.running = true;
    drop(shared);
    let runner = Arc::clone(model);
    let spawned = std::thread::Builder::new()
        .name("keyhole-model".into())
        .spawn(move || run(&runner));
    if let Err(e) = spawned {
        stop_with(model, &GenerationError::NoThread(Arc::new(e)));
    }
}

/// Runs the batch until no job is left, then leaves its idle sequences with the model.
fn run(model: &LocalModel) {
    let idle = std::mem::take(&mut model.batch.shared().idle);
    let mut engine = Engine {
        model,
        waiting: VecDeque::new(),
        begun: Vec::new(),
        idle,
    };
    let ran = catch_unwind(AssertUnwindSafe(|| {
        loop {
            {
                let mut shared = model.batch.shared();
                engine.waiting.extend(shared.waiting.drain(..));
                if engine.waiting.is_empty() && engine.begun.is_empty() {
                    shared.running = false;
                    shared.idle = std::mem::take(&mut engine.idle);
                    return;
                }
            }
            engine.iterate();
        }
    }));
    if ran.is_err() {
        // A bug outside the guarded model code: the jobs it held see their replies dropped.
        stop_with(model, &GenerationError::ThreadPanicked);
    }
}

/// Marks the batch as not running and fails the jobs waiting for it with `error`.
fn stop_with(model: &LocalModel, error: &GenerationError) {
    let mut shared = model.batch.shared();
    shared.running = false;
    for job in shared.waiting.drain(..) {
        let _ = job.reply.send(Err(error.clone()));
    }
}

/// The batch while a thread runs it.
struct Engine<'a> {
    model: &'a LocalModel,
    /// Jobs whose prompt is not read yet, in arrival order.
    waiting: VecDeque<Job>,
    /// Jobs whose prompt was read, with their samples decoding.
    begun: Vec<Begun>,
    /// Sequences no job uses, least recently used first.
    idle: Vec<Sequence>,
}

/// A job whose prompt was read.
struct Begun {
    job: Job,
    /// The logits after the prompt: where every sample starts.
    logits: Tensor,
    /// Samples begun so far.
    started: usize,
    /// Each sample's final text once it is done.
    texts: Vec<Option<String>>,
    /// The samples decoding, each a sequence of the batch.
    live: Vec<Sample>,
    /// Why the job failed, once it did.
    failed: Option<GenerationError>,
}

/// One sample being decoded.
struct Sample {
    index: usize,
    sequence: Sequence,
    sampler: LogitsProcessor,
    /// The distribution of its next token.
    logits: Tensor,
    generated: Vec<u32>,
    text: String,
    stream: Stream,
    /// The token it feeds in this step.
    next: Option<u32>,
}

impl Engine<'_> {
    /// Drops cancelled jobs, reads the prompts of waiting jobs while sequences are free,
    /// begins more samples, decodes one token for every live sample, and answers the jobs
    /// that are done.
    fn iterate(&mut self) {
        self.drop_cancelled();
        self.begin_waiting();
        self.begin_samples();
        self.step();
        self.answer();
    }

    /// Sequences decoding.
    fn live(&self) -> usize {
        self.begun.iter().map(|b| b.live.len()).sum()
    }

    fn drop_cancelled(&mut self) {
        // Nobody waits for their answers.
        self.waiting
            .retain(|job| !job.cancel.load(Ordering::Relaxed));
        for begun in self
            .begun
            .extract_if(.., |b| b.job.cancel.load(Ordering::Relaxed))
        {
            // What the sequences hold is still good for a prompt that shares it.
            self.idle.extend(begun.live.into_iter().map(|s| s.sequence));
        }
    }

    /// Reads waiting jobs' prompts, in arrival order, while fewer than [`MAX_SEQUENCES`]
    /// sequences decode: jobs sent together are all read before the next step, so that they
    /// decode together.
    fn begin_waiting(&mut self) {
        while self.live() < MAX_SEQUENCES
            && let Some(job) = self.waiting.pop_front()
        {
            let mut sequence = self.sequence_for(&job.prompt);
            if let Some(deltas) = &job.deltas {
                // Its turn has come: say so (see `Backend::takes_turns`).
                let _ = deltas.send(Delta::started());
            }
            let transformer = &self.model.transformer;
            let cancelled = || job.cancel.load(Ordering::Relaxed);
            let read = header::guarded("generation", || {
                transformer
                    .prefill(&mut sequence, &job.prompt, cancelled)
                    .map_err(|e| failed(&e))
            });
            match read {
                Ok(Some(prefilled)) => {
                    let computed = job.prompt.len() - prefilled.reused;
                    self.model
                        .batch
                        .prompt_tokens
                        .fetch_add(computed as u64, Ordering::Relaxed);
                    tracing::debug!(
                        prompt = job.prompt.len(),
                        reused = prefilled.reused,
                        "prompt read, its first tokens from the cache"
                    );
                    let mut begun = Begun {
                        texts: vec![None; job.samples],
                        job,
                        logits: prefilled.logits,
                        started: 0,
                        live: Vec::new(),
                        failed: None,
                    };
                    begun.begin_sample(sequence);
                    self.begun.push(begun);
                }
                Ok(None) => {
                    // Cancelled: the sequence keeps what it read.
                    self.idle.push(sequence);
                }
                Err(error) => {
                    // A panic may have left some layers' caches longer than others.
                    sequence.rewind(0);
                    self.idle.push(sequence);
                    let _ = job.reply.send(Err(error));
                }
            }
        }
    }

    /// Begins the next samples of jobs that have more, each in a copy of its prompt's keys
    /// and values, while fewer than [`MAX_SEQUENCES`] sequences decode.
    fn begin_samples(&mut self) {
        let mut free = MAX_SEQUENCES.saturating_sub(self.live());
        for index in 0..self.begun.len() {
            while free > 0 && self.begun[index].wants_sample() {
                self.make_room();
                let begun = &mut self.begun[index];
                let Some(source) = begun.live.first() else {
                    break;
                };
                let prompt = begun.job.prompt.len();
                let forked = header::guarded("generation", || {
                    Ok::<_, GenerationError>(source.sequence.fork(prompt))
                });
                match forked {
                    Ok(sequence) => begun.begin_sample(sequence),
                    Err(error) => {
                        begun.failed = Some(error);
                        break;
                    }
                }
                free -= 1;
            }
        }
    }

    /// One token for every live sample: each draws its next token from its logits, and those
    /// that go on feed theirs in one batched step.
    fn step(&mut self) {
        let vocabulary = &self.model.vocabulary;
        let waiting = !self.waiting.is_empty();
        for begun in &mut self.begun {
            let max_tokens = begun.job.max_tokens;
            for sample in &mut begun.live {
                let drawn = header::guarded("generation", || sample.draw(vocabulary, max_tokens));
                match drawn {
                    Ok(next) => sample.next = next,
                    Err(error) => {
                        begun.failed = Some(error);
                        break;
                    }
                }
            }
            self.idle.extend(begun.settle(waiting));
        }
        let mut sequences = Vec::new();
        let mut tokens = Vec::new();
        for begun in self.begun.iter_mut().filter(|b| b.failed.is_none()) {
            for sample in &mut begun.live {
                if let Some(next) = sample.next {
                    sequences.push(&mut sample.sequence);
                    tokens.push(next);
                }
            }
        }
        if tokens.is_empty() {
            return;
        }
        let transformer = &self.model.transformer;
        let stepped = header::guarded("generation", || {
            // On a thread of the CPU pool, whose other threads then take the products'
            // pieces without a hand-over for each.
            let logits = rayon::scope(|_| transformer.step(&mut sequences, &tokens))
                .map_err(|e| failed(&e))?;
            (0..tokens.len())
                .map(|row| logits.get(row).map_err(|e| failed(&e)))
                .collect::<Result<Vec<_>, _>>()
        });
        drop(sequences);
        let batch = &self.model.batch;
        batch.steps.fetch_add(1, Ordering::Relaxed);
        batch
            .tokens
            .fetch_add(tokens.len() as u64, Ordering::Relaxed);
        let mut rows = match stepped {
            Ok(rows) => rows.into_iter(),
            Err(error) => {
                // Every sequence in the step may hold some layers' keys of it and not others'.
                for begun in self.begun.iter_mut().filter(|b| b.failed.is_none()) {
                    if begun.live.iter().any(|s| s.next.is_some()) {
                        for sample in &mut begun.live {
                            sample.sequence.rewind(0);
                        }
                        begun.failed = Some(error.clone());
                    }
                }
                return;
            }
        };
        for begun in self.begun.iter_mut().filter(|b| b.failed.is_none()) {
            for sample in &mut begun.live {
                if sample.next.take().is_some() {
                    sample.logits = rows.next().expect("a row per fed token");
                }
            }
        }
    }

    /// Answers the jobs that are done or failed; their sequences become idle.
    fn answer(&mut self) {
        let done = |b: &mut Begun| b.failed.is_some() || b.texts.iter().all(Option::is_some);
        for begun in self.begun.extract_if(.., done) {
            self.idle
                .extend(begun.live.into_iter().map(|sample| sample.sequence));
            let answer = match begun.failed {
                Some(error) => Err(error),
                None => Ok(begun.texts.into_iter().flatten().collect()),
            };
            let _ = begun.job.reply.send(answer);
        }
    }

    /// A sequence to read `prompt` into: the idle one that holds the longest prefix of it
    /// (the least recently used of equals) where that is at least half the prompt or no new
    /// one may be made, else a new one.
    fn sequence_for(&mut self, prompt: &[u32]) -> Sequence {
        let best = self.idle.iter().enumerate().fold(
            None,
            |best: Option<(usize, usize)>, (index, sequence)| {
                let shared = sequence.shared(prompt);
                match best {
                    Some((_, most)) if most >= shared => best,
                    _ => Some((index, shared)),
                }
            },
        );
        let full = self.live() + self.idle.len() >= MAX_SEQUENCES;
        match best {
            Some((index, shared)) if full || 2 * shared >= prompt.len() => self.idle.remove(index),
            _ => self.model.transformer.sequence(),
        }
    }

    /// Drops the least recently used idle sequence where a new one would pass
    /// [`MAX_SEQUENCES`].
    fn make_room(&mut self) {
        if self.live() + self.idle.len() >= MAX_SEQUENCES && !self.idle.is_empty() {
            self.idle.remove(0);
        }
    }
}

impl Begun {
    /// Whether samples remain to begin.
    fn wants_sample(&self) -> bool {
        self.failed.is_none() && self.started < self.job.samples
    }

    /// Begins the next sample in `sequence`, which holds the prompt.
    fn begin_sample(&mut self, sequence: Sequence) {
        let index = self.started;
        self.started += 1;
        let seed = self.job.seed.wrapping_add(index as u64);
        self.live.push(Sample {
            index,
            sequence,
            sampler: LogitsProcessor::new(seed, self.job.temperature, None),
            logits: self.logits.clone(),
            generated: Vec::new(),
            text: String::new(),
            stream: Stream {
                index,
                sent: 0,
                stop: Arc::clone(&self.job.stop),
                deltas: self.job.deltas.clone(),
            },
            next: None,
        });
    }

    /// Takes the samples that are done out of the batch, keeping their texts, and returns
    /// the sequences it no longer needs. Where the job has samples left, a done sample's
    /// sequence goes on with the next one from the prompt, unless other jobs are `waiting`
    /// and this job keeps a sequence without it.
    fn settle(&mut self, waiting: bool) -> Vec<Sequence> {
        if self.failed.is_some() {
            return Vec::new();
        }
        let (going, done): (Vec<Sample>, Vec<Sample>) = std::mem::take(&mut self.live)
            .into_iter()
            .partition(|sample| sample.next.is_some());
        self.live = going;
        let mut released = Vec::new();
        for mut sample in done {
            self.texts[sample.index] = Some(sample.stream.finish(&sample.text));
            let mut sequence = sample.sequence;
            // The job's last sequence stays with it; others make way for waiting jobs.
            let keep = !waiting || self.live.is_empty();
            if self.wants_sample() && keep {
                // Its first token is drawn at the next step.
                sequence.rewind(self.job.prompt.len());
                self.begin_sample(sequence);
            } else {
                released.push(sequence);
            }
        }
        released
    }
}

impl Sample {
    /// Draws the next token: `Some` to feed it, `None` once the sample is done (an end
    /// token, a stop sequence or `max_tokens`).
    fn draw(
        &mut self,
        vocabulary: &Vocabulary,
        max_tokens: usize,
    ) -> Result<Option<u32>, GenerationError> {
        if self.generated.len() >= max_tokens {
            return Ok(None);
        }
        let next = self.sampler.sample(&self.logits).map_err(|e| failed(&e))?;
        if vocabulary.ends(next) {
            return Ok(None);
        }
        self.generated.push(next);
        self.text = vocabulary.decode(&self.generated)?;
        if self.stream.stopped(&self.text) || self.generated.len() >= max_tokens {
            return Ok(None);
        }
        Ok(Some(next))
    }
}

fn failed(error: &candle_core::Error) -> GenerationError {
    GenerationError::Failed(one_line(error))
}

/// Passes a sample's text on as deltas, holding back what may still change: an incomplete
/// UTF-8 character at the end (a character split across tokens decodes as U+FFFD until its
/// last byte arrives) and a tail that may begin a stop sequence.
struct Stream {
    index: usize,
    /// Bytes of the text already sent.
    sent: usize,
    stop: Arc<[String]>,
    deltas: Option<UnboundedSender<Delta>>,
}

impl Stream {
    /// Sends what of `text` is settled; true once `text` holds a stop sequence.
    fn stopped(&mut self, text: &str) -> bool {
        let cut = crate::model::apply_stop(text, &self.stop).len();
        if cut < text.len() {
            self.send(&text[..cut]);
            return true;
        }
        let settled = text.trim_end_matches(char::REPLACEMENT_CHARACTER);
        let held = self
            .stop
            .iter()
            .filter_map(|stop| {
                (1..stop.len())
                    .rev()
                    .filter(|&n| stop.is_char_boundary(n))
                    .find(|&n| settled.ends_with(&stop[..n]))
            })
            .max()
            .unwrap_or(0);
        self.send(&settled[..settled.len() - held]);
        false
    }

    /// The final text of the sample, with what was held back sent.
    fn finish(&mut self, text: &str) -> String {
        let text = crate::model::apply_stop(text, &self.stop);
        let text = text.trim_end_matches(char::REPLACEMENT_CHARACTER);
        self.send(text);
        text.to_string()
    }

    fn send(&mut self, settled: &str) {
        let Some(new) = settled.get(self.sent..).filter(|new| !new.is_empty()) else {
            return;
        };
        if let Some(deltas) = &self.deltas {
            // A closed receiver means nobody listens any more; the final text still counts.
            let _ = deltas.send(Delta {
                index: self.index,
                text: new.to_string(),
            });
        }
        self.sent = settled.len();
    }
}

#[cfg(test)]
mod tests {
    use candle_core::quantized::GgmlDType;
    use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

    use super::*;
    use crate::model::config::Matrices;
    use crate::model::local::fixture::{END, tiny};

    fn model() -> (tempfile::TempDir, LocalModel) {
        let dir = tempfile::tempdir().unwrap();
        let path = tiny(dir.path(), "llama", GgmlDType::Q8_0, false);
        let model = LocalModel::load(&path, Matrices::Auto).unwrap();
        (dir, model)
    }

    fn engine(model: &LocalModel) -> Engine<'_> {
        Engine {
            model,
            waiting: VecDeque::new(),
            begun: Vec::new(),
            idle: Vec::new(),
        }
    }

    /// A prompt of `length` tokens, none the end of text, from `seed`.
    fn prompt(seed: usize, length: usize) -> Vec<u32> {
        (0..length)
            .map(|i| ((seed * 13 + i * 7) % END) as u32)
            .collect()
    }

    /// What the test keeps of a job it hands over.
    struct Sent {
        answer: oneshot::Receiver<Answer>,
        deltas: UnboundedReceiver<Delta>,
        cancel: Arc<AtomicBool>,
    }

    impl Sent {
        fn texts(mut self) -> Vec<String> {
            self.answer.try_recv().unwrap().unwrap()
        }

        /// The texts streamed so far, the start left out.
        fn streamed(&mut self) -> Vec<String> {
            let mut texts = Vec::new();
            while let Ok(delta) = self.deltas.try_recv() {
                if !delta.is_start() {
                    texts.push(delta.text);
                }
            }
            texts
        }
    }

    fn job(prompt: Vec<u32>, samples: usize, temperature: Option<f64>, seed: u64) -> (Job, Sent) {
        let (reply, answer) = oneshot::channel();
        let (deltas, streamed) = unbounded_channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let job = Job {
            prompt,
            max_tokens: 24,
            samples,
            seed,
            temperature,
            stop: Arc::new([]),
            cancel: Arc::clone(&cancel),
            deltas: Some(deltas),
            reply,
        };
        let sent = Sent {
            answer,
            deltas: streamed,
            cancel,
        };
        (job, sent)
    }

    fn run_out(engine: &mut Engine) {
        while !engine.waiting.is_empty() || !engine.begun.is_empty() {
            engine.iterate();
        }
    }

    /// The texts of `job` run on an engine of its own.
    fn alone(model: &LocalModel, job: (Job, Sent)) -> Vec<String> {
        let mut engine = engine(model);
        engine.waiting.push_back(job.0);
        run_out(&mut engine);
        job.1.texts()
    }

    fn greedy(seed: usize, length: usize) -> (Job, Sent) {
        job(prompt(seed, length), 1, None, 0)
    }

    #[test]
    fn jobs_waiting_together_decode_in_shared_steps_and_write_what_each_writes_alone() {
        let (_dir, model) = model();
        // Prompts of different lengths, completions that end at different steps.
        let lengths = [5, 40, 17, 3];
        let max_tokens = [24, 6, 15, 1];
        let greedy = |i: usize| {
            let (mut job, sent) = greedy(i, lengths[i]);
            job.max_tokens = max_tokens[i];
            (job, sent)
        };
        let expected: Vec<Vec<String>> = (0..4).map(|i| alone(&model, greedy(i))).collect();
        for (texts, max) in expected.iter().zip(max_tokens) {
            // Each character is a token.
            assert_eq!(texts[0].chars().count(), max, "{expected:?}");
        }
        let mut engine = engine(&model);
        let (jobs, sent): (Vec<Job>, Vec<Sent>) = (0..4).map(greedy).unzip();
        engine.waiting.extend(jobs);
        let before = model.decoded();
        run_out(&mut engine);
        let after = model.decoded();
        let texts: Vec<Vec<String>> = sent.into_iter().map(Sent::texts).collect();
        assert_eq!(texts, expected);
        // One step per token of the longest; each one's last token is drawn but not fed.
        assert_eq!(after.steps - before.steps, 23);
        assert_eq!(after.tokens - before.tokens, 23 + 5 + 14);
    }

    #[test]
    fn a_cancelled_job_leaves_the_batch_at_the_next_step_and_the_others_go_on() {
        let (_dir, model) = model();
        let expected: Vec<Vec<String>> = (0..3).map(|i| alone(&model, greedy(i, 9))).collect();
        let mut engine = engine(&model);
        let (jobs, mut sent): (Vec<Job>, Vec<Sent>) = (0..3).map(|i| greedy(i, 9)).unzip();
        engine.waiting.extend(jobs);
        engine.iterate();
        assert_eq!(engine.live(), 3);
        for sent in &mut sent {
            assert_eq!(sent.streamed().len(), 1);
        }
        sent[1].cancel.store(true, Ordering::Relaxed);
        engine.iterate();
        assert_eq!(engine.live(), 2);
        run_out(&mut engine);
        let mut cancelled = sent.remove(1);
        // Nothing more was streamed, the stream ended and no answer came.
        assert!(cancelled.streamed().is_empty());
        assert!(cancelled.deltas.is_closed());
        assert!(cancelled.answer.try_recv().is_err());
        let texts: Vec<Vec<String>> = sent.into_iter().map(Sent::texts).collect();
        assert_eq!(texts, [expected[0].clone(), expected[2].clone()]);
        // Its sequence stays for a prompt that shares its prefix.
        assert_eq!(engine.idle.len(), 3);
    }

    #[test]
    fn samples_share_one_reading_of_the_prompt_and_each_draws_as_alone_with_its_seed() {
        let (_dir, model) = model();
        let text = prompt(3, 30);
        let samples = MAX_SEQUENCES + 2;
        let sampled = |n, seed| job(text.clone(), n, Some(1.5), seed);
        let before = model.decoded();
        let texts = alone(&model, sampled(samples, 21));
        assert_eq!(model.decoded().prompt_tokens - before.prompt_tokens, 30);
        assert_eq!(texts.len(), samples);
        assert!(texts.iter().any(|t| *t != texts[0]), "{texts:?}");
        assert_eq!(alone(&model, sampled(samples, 21)), texts);
        // Sample i draws as a request of one sample with the seed moved by i.
        for (index, text) in texts.iter().enumerate() {
            let one = alone(&model, sampled(1, 21 + index as u64));
            assert_eq!(one, std::slice::from_ref(text));
        }
    }

    #[test]
    fn a_job_waiting_while_another_s_samples_fill_the_batch_gets_the_next_free_sequence() {
        let (_dir, model) = model();
        let mut engine = engine(&model);
        let (many, many_sent) = job(prompt(1, 12), 4 * MAX_SEQUENCES, Some(1.5), 2);
        engine.waiting.push_back(many);
        engine.iterate();
        assert_eq!(engine.live(), MAX_SEQUENCES);
        let (one, mut one_sent) = greedy(2, 12);
        engine.waiting.push_back(one);
        while !matches!(one_sent.answer.try_recv(), Ok(Ok(_))) {
            assert!(
                !engine.begun.is_empty(),
                "the second job was never answered"
            );
            engine.iterate();
        }
        // The first has samples left when the second is done.
        assert!(engine.begun[0].started < 4 * MAX_SEQUENCES);
        run_out(&mut engine);
        assert_eq!(many_sent.texts().len(), 4 * MAX_SEQUENCES);
        assert!(engine.live() + engine.idle.len() <= MAX_SEQUENCES);
    }

    #[test]
    fn a_prompt_reads_only_what_the_idle_sequence_holding_most_of_it_lacks() {
        let (_dir, model) = model();
        let mut engine = engine(&model);
        let (first, second) = (prompt(1, 60), prompt(2, 60));
        for text in [&first, &second] {
            engine.waiting.push_back(job(text.clone(), 1, None, 0).0);
            run_out(&mut engine);
        }
        let mut edited = first.clone();
        edited[50] = (edited[50] + 1) % END as u32;
        let before = model.decoded().prompt_tokens;
        engine.waiting.push_back(job(edited, 1, None, 0).0);
        run_out(&mut engine);
        assert_eq!(model.decoded().prompt_tokens - before, 10);
        assert_eq!(engine.idle.len(), 2);
    }
}
