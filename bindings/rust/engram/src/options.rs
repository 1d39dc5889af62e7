//! Options: rate limiters, selectors, and the options of tables, writers
//! and samples, with a table's information.
use super::*;

/// Reverb's rate limiter (see engram(7)).
#[derive(Clone, Copy, Debug, PartialEq)]
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let mut o = engram::TableOptions::new("replay", vec![engram::Column::new("x", engram::Dtype::F32, &[4])], 1_000_000);
/// // Ape-X: about 4 samples per insert once 50 000 items are in, give or take 10 000.
/// o.rate_limiter = Some(engram::RateLimiter::sample_to_insert_ratio(4.0, 50_000, 10_000.0)?);
/// # Ok(()) }
/// ```
pub struct RateLimiter(pub sys::engram_rate_limiter);

impl RateLimiter {
    /// Sampling may start once the table holds `n` items; inserts never wait.
    pub fn min_size(n: i64) -> Result<RateLimiter> {
        let mut r = sys::engram_rate_limiter::default();
        check(unsafe { sys::engram_rate_limiter_min_size(&mut r, n) })?;
        Ok(RateLimiter(r))
    }
    /// A queue of at most `size` items (pair with a FIFO sampler and max_times_sampled 1).
    pub fn queue(size: i64) -> Result<RateLimiter> {
        let mut r = sys::engram_rate_limiter::default();
        check(unsafe { sys::engram_rate_limiter_queue(&mut r, size) })?;
        Ok(RateLimiter(r))
    }
    /// Samples per insert near `spi` once `min_size` items exist, within +-error_buffer.
    pub fn sample_to_insert_ratio(spi: f64, min_size: i64, error_buffer: f64) -> Result<RateLimiter> {
        let mut r = sys::engram_rate_limiter::default();
        check(unsafe { sys::engram_rate_limiter_sample_to_insert_ratio(&mut r, spi, min_size, error_buffer) })?;
        Ok(RateLimiter(r))
    }
}

/// How a table selects items to sample or to evict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let mut o = engram::TableOptions::new("replay", vec![engram::Column::new("x", engram::Dtype::F32, &[4])], 100_000);
/// o.sampler = engram::Selector::Prioritized; // proportional to priority^0.6
/// o.priority_exponent = 0.6;
/// o.remover = engram::Selector::Fifo;
/// # Ok(()) }
/// ```
pub enum Selector {
    /// Uniformly at random.
    Uniform = 1,
    /// Proportionally to priority^exponent.
    Prioritized = 2,
    /// Oldest first.
    Fifo = 3,
    /// Newest first.
    Lifo = 4,
    /// Highest priority first.
    MaxHeap = 5,
    /// Lowest priority first.
    MinHeap = 6,
}

impl Selector {
    // engram_selector's value as read from a struct the library filled.
    fn from_c(v: i32) -> Selector {
        match v {
            2 => Selector::Prioritized,
            3 => Selector::Fifo,
            4 => Selector::Lifo,
            5 => Selector::MaxHeap,
            6 => Selector::MinHeap,
            _ => Selector::Uniform,
        }
    }
}

/// What [`Client::create_table`] makes; the fields not given to `new` have
/// the C defaults.
#[derive(Clone, Debug)]
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let mut o = engram::TableOptions::new("queue", vec![engram::Column::new("obs", engram::Dtype::U8, &[84, 84])], 64);
/// o.sampler = engram::Selector::Fifo;
/// o.max_times_sampled = 1;
/// o.rate_limiter = Some(engram::RateLimiter::queue(16)?);
/// client.create_table(&o)?;
/// # Ok(()) }
/// ```
pub struct TableOptions {
    /// Table name.
    pub name: String,
    /// The signature.
    pub columns: Vec<Column>,
    /// Capacity in items.
    pub max_size: u64,
    /// Default Uniform.
    pub sampler: Selector,
    /// Default Fifo.
    pub remover: Selector,
    /// For Prioritized; default 1.
    pub priority_exponent: f64,
    /// 0 = unlimited (default).
    pub max_times_sampled: u32,
    /// 1..8; default 8.
    pub max_chunks_per_item: u32,
    /// Default: min_size 1.
    pub rate_limiter: Option<RateLimiter>,
}

impl TableOptions {
    /// A table of `max_size` items with these columns.
    pub fn new(name: &str, columns: Vec<Column>, max_size: u64) -> TableOptions {
        // The defaults are engram_table_options_init's, not copies of them.
        let mut c = unsafe { std::mem::zeroed::<sys::engram_table_options>() };
        unsafe { sys::engram_table_options_init(&mut c) };
        TableOptions { name: name.to_string(), columns, max_size, sampler: Selector::from_c(c.sampler),
                       remover: Selector::from_c(c.remover), priority_exponent: c.priority_exponent,
                       max_times_sampled: c.max_times_sampled, max_chunks_per_item: c.max_chunks_per_item,
                       rate_limiter: None }
    }
}

/// What [`Client::writer`] opens.
#[derive(Clone, Debug)]
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let mut o = engram::WriterOptions::new(vec![engram::Column::new("obs", engram::Dtype::F32, &[4])]);
/// o.chunk_length = 16;  // steps per chunk
/// o.max_item_steps = 3; // 3-step transitions
/// let writer = client.writer(&o)?;
/// # Ok(()) }
/// ```
pub struct WriterOptions {
    /// The step's columns (the tables' signature).
    pub columns: Vec<Column>,
    /// Steps per chunk; default 1.
    pub chunk_length: u32,
    /// Longest item; 0 = chunk_length.
    pub max_item_steps: u32,
    /// How long an item may wait for the rate limiter: -1 for ever (default), 0 not at all.
    pub insert_timeout_ms: i32,
    /// Remember the keys of created items ([`Writer::take_keys`]).
    pub keep_keys: bool,
}

impl WriterOptions {
    /// A writer of steps with these columns.
    pub fn new(columns: Vec<Column>) -> WriterOptions {
        let mut c = unsafe { std::mem::zeroed::<sys::engram_writer_options>() };
        unsafe { sys::engram_writer_options_init(&mut c) };
        WriterOptions { columns, chunk_length: c.chunk_length, max_item_steps: c.max_item_steps,
                        insert_timeout_ms: c.insert_timeout_ms, keep_keys: c.keep_keys != 0 }
    }
}

/// What to sample.
#[derive(Clone, Copy, Debug)]
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let table = client.open_table("replay")?;
/// let mut o = engram::SampleOptions::new(256);
/// o.num_steps = 3;
/// o.timeout_ms = 1000;
/// o.no_repeats = true;
/// let batch = table.sample(&o)?;
/// # Ok(()) }
/// ```
pub struct SampleOptions {
    /// Items per batch.
    pub batch_size: u32,
    /// Steps per item (every item sampled must have as many); default 1.
    pub num_steps: u32,
    /// Wait for the rate limiter: -1 for ever (default), 0 not at all.
    pub timeout_ms: i32,
    /// No item twice in one batch (default false): see engram(7), "Batches
    /// without repeats", for how each sampler draws and what the reported
    /// probabilities are. A table holding fewer items than the batch is
    /// refused with `ENGRAM_E_RANGE`.
    pub no_repeats: bool,
}

impl SampleOptions {
    /// Batches of `batch_size` one-step items, waiting for ever.
    pub fn new(batch_size: u32) -> SampleOptions {
        let mut c = unsafe { std::mem::zeroed::<sys::engram_sample_options>() };
        unsafe { sys::engram_sample_options_init(&mut c) };
        SampleOptions { batch_size, num_steps: c.num_steps, timeout_ms: c.timeout_ms,
                        no_repeats: c.flags & sys::ENGRAM_SAMPLE_NO_REPEATS != 0 }
    }
    pub(crate) fn c(&self) -> sys::engram_sample_options {
        let mut o = unsafe { std::mem::zeroed::<sys::engram_sample_options>() };
        unsafe { sys::engram_sample_options_init(&mut o) };
        o.batch_size = self.batch_size;
        o.num_steps = self.num_steps;
        o.timeout_ms = self.timeout_ms;
        o.flags = if self.no_repeats { sys::ENGRAM_SAMPLE_NO_REPEATS } else { 0 };
        o
    }
}

/// A table's size, counters and settings ([`Client::table_info`]).
#[derive(Clone, Debug)]
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let info = client.table_info("replay")?;
/// println!("{} items, {} inserts, {} samples, max priority {}", info.size, info.inserts, info.samples, info.max_priority);
/// # Ok(()) }
/// ```
pub struct TableInfo {
    /// Name.
    pub name: String,
    /// Capacity.
    pub max_size: u64,
    /// Items now.
    pub size: u64,
    /// Rate-limiter counters.
    pub inserts: u64,
    /// Rate-limiter counters.
    pub samples: u64,
    /// Rate-limiter counters.
    pub deletes: u64,
    /// Priority updates applied.
    pub updates: u64,
    /// Items evicted.
    pub evictions: u64,
    /// Connections that have the table open.
    pub clients: u32,
    /// The table's rate limiter.
    pub rate_limiter: RateLimiter,
    /// The largest priority of the items held now (0 when there are none).
    pub max_priority: f64,
    /// The smallest priority of the items held now (0 when there are none).
    pub min_priority: f64,
    /// For a view over shards: its shards (0 for a table).
    pub shards: u32,
    /// Of those, the shards whose links are up.
    pub shards_present: u32,
}
