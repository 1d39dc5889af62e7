//! engram: experience replay through shared memory, from Rust.
//!
//! A safe layer over libengram's C ABI (`engram/engram.h`, `man 3 engram_*`).
//! Handles borrow what they come from, so that none outlives it: a
//! [`Table`] and a [`Writer`] borrow their [`Client`], a zero-copy [`Batch`]
//! its [`Table`], and the slices a batch hands out borrow the batch. Every
//! handle is released by `Drop`.
//!
//! Threads: a [`Client`] may move to another thread ([`Send`]) but is not
//! shared ([`Sync`]): the C rule is that a client and every handle made
//! from it are used by one thread at a time. Use one client per thread for
//! parallel work. An [`Interrupter`] may be used from any thread to end a
//! blocking call.
//!
//! ```no_run
//! use engram::{bytes, Client, Column, Dtype, SampleOptions, TableOptions, WriterOptions};
//! # fn main() -> Result<(), engram::Error> {
//! let columns = vec![Column::new("obs", Dtype::F32, &[4]), Column::new("action", Dtype::I32, &[])];
//! let client = Client::connect(None)?; // $ENGRAM_SOCKET or /run/engram/engram.sock
//! client.create_table(&TableOptions::new("replay", columns.clone(), 10_000))?;
//! let table = client.open_table("replay")?;
//! let mut writer = client.writer(&WriterOptions::new(columns))?;
//! writer.append(&[bytes(&[0.0f32, 1.0, 2.0, 3.0]), bytes(&[1i32])])?;
//! writer.create_item(&table, 1, 1.0)?;
//! writer.flush(-1)?;
//! let sample = table.sample(&SampleOptions::new(1))?;
//! let obs: &[f32] = sample.column(0)?; // [batch, steps, 4]
//! let batch = table.sample_view(&SampleOptions::new(1))?; // zero-copy
//! let view: Vec<&[f32]> = batch.views(0, 0)?; // borrows the batch
//! # Ok(()) }
//! ```
#![warn(missing_docs)]

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

use engram_sys as sys;

pub use sys::engram_sample_info as SampleInfo;

// --- errors ---------------------------------------------------------------------

/// A failed call: the `ENGRAM_E_*` code and the library's message (what was
/// wrong, and how to fix it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: i32,
    message: String,
}

impl Error {
    fn last(code: c_int) -> Error {
        // engram_last_error is this thread's message, valid until its next failing call.
        let message = unsafe { CStr::from_ptr(sys::engram_last_error()) }.to_string_lossy().into_owned();
        Error { code, message }
    }
    fn new(code: c_int, message: impl Into<String>) -> Error {
        Error { code, message: message.into() }
    }
    /// The `ENGRAM_E_*` code (engram_sys has the constants).
    pub fn code(&self) -> i32 {
        self.code
    }
    /// What was wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// The code's name, as engram_strerror gives it.
    pub fn name(&self) -> String {
        unsafe { CStr::from_ptr(sys::engram_strerror(self.code)) }.to_string_lossy().into_owned()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.name())
    }
}

impl std::error::Error for Error {}

/// The result of every fallible call.
pub type Result<T> = std::result::Result<T, Error>;

fn check(rc: c_int) -> Result<()> {
    if rc == sys::ENGRAM_OK {
        Ok(())
    } else {
        Err(Error::last(rc))
    }
}

fn c_string(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| Error::new(sys::ENGRAM_E_INVALID, format!("{} {:?} contains a NUL byte", what, s)))
}

/// The loaded libengram's version, "MAJOR.MINOR.PATCH".
pub fn version() -> String {
    unsafe { CStr::from_ptr(sys::engram_version_string()) }.to_string_lossy().into_owned()
}

// --- columns ----------------------------------------------------------------------

/// Element type of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    /// u8
    U8,
    /// i8
    I8,
    /// u16
    U16,
    /// i16
    I16,
    /// u32
    U32,
    /// i32
    I32,
    /// u64
    U64,
    /// i64
    I64,
    /// IEEE half precision (bytes only in Rust)
    F16,
    /// f32
    F32,
    /// f64
    F64,
    /// one byte, 0 or 1 (bytes only in Rust)
    Bool,
}

const DTYPES: [Dtype; 12] = [Dtype::U8, Dtype::I8, Dtype::U16, Dtype::I16, Dtype::U32, Dtype::I32, Dtype::U64,
                             Dtype::I64, Dtype::F16, Dtype::F32, Dtype::F64, Dtype::Bool];

impl Dtype {
    fn code(self) -> i32 {
        DTYPES.iter().position(|&d| d == self).unwrap() as i32 + 1
    }
    fn from_code(code: i32) -> Option<Dtype> {
        DTYPES.get((code as usize).wrapping_sub(1)).copied()
    }
    /// Bytes of one element.
    pub fn size(self) -> usize {
        match self {
            Dtype::U8 | Dtype::I8 | Dtype::Bool => 1,
            Dtype::U16 | Dtype::I16 | Dtype::F16 => 2,
            Dtype::U32 | Dtype::I32 | Dtype::F32 => 4,
            Dtype::U64 | Dtype::I64 | Dtype::F64 => 8,
        }
    }
}

/// Plain numeric types that columns hold: any bit pattern is a valid value
/// and there is no padding, so their slices convert to and from bytes.
pub trait Element: Copy + private::Sealed {
    /// The column type it reads and writes.
    const DTYPE: Dtype;
}

mod private {
    pub trait Sealed {}
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl private::Sealed for $t {}
        impl Element for $t { const DTYPE: Dtype = Dtype::$d; }
    )*};
}
element!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, u64 => U64, i64 => I64, f32 => F32,
         f64 => F64);

/// The bytes of a slice of values, for [`Writer::append`].
pub fn bytes<T: Element>(values: &[T]) -> &[u8] {
    // Sound: Element types have no padding and no invalid bit patterns.
    unsafe { std::slice::from_raw_parts(values.as_ptr() as *const u8, std::mem::size_of_val(values)) }
}

/// One column of a signature: a name, a type and a shape (empty: a scalar).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Column {
    /// 1..31 bytes of letters, digits, '_', '.', ':', '-'.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Dimensions, at most 6.
    pub shape: Vec<u32>,
}

impl Column {
    /// A column named `name` of `dtype` values shaped `shape`.
    pub fn new(name: &str, dtype: Dtype, shape: &[u32]) -> Column {
        Column { name: name.to_string(), dtype, shape: shape.to_vec() }
    }
    /// Bytes of one step of this column.
    pub fn step_bytes(&self) -> usize {
        self.shape.iter().map(|&d| d as usize).product::<usize>() * self.dtype.size()
    }
}

/// A signature as the C API takes it; keeps the names alive.
struct CColumns {
    _names: Vec<CString>,
    cols: Vec<sys::engram_column>,
}

fn c_columns(columns: &[Column]) -> Result<CColumns> {
    let mut names = Vec::with_capacity(columns.len());
    let mut cols = Vec::with_capacity(columns.len());
    for c in columns {
        if c.shape.len() > sys::ENGRAM_MAX_RANK {
            return Err(Error::new(sys::ENGRAM_E_INVALID,
                                  format!("column {}: rank {} > {}", c.name, c.shape.len(), sys::ENGRAM_MAX_RANK)));
        }
        let name = c_string(&c.name, "column name")?;
        let mut shape = [0u32; sys::ENGRAM_MAX_RANK];
        shape[..c.shape.len()].copy_from_slice(&c.shape);
        cols.push(sys::engram_column { name: name.as_ptr(), dtype: c.dtype.code(), rank: c.shape.len() as u32, shape });
        names.push(name);
    }
    Ok(CColumns { _names: names, cols })
}

// --- rate limiters and options ------------------------------------------------------

/// Reverb's rate limiter (see engram(7)).
#[derive(Clone, Copy, Debug, PartialEq)]
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

/// What [`Client::create_table`] makes; the fields not given to `new` have
/// the C defaults.
#[derive(Clone, Debug)]
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
        TableOptions { name: name.to_string(), columns, max_size, sampler: Selector::Uniform, remover: Selector::Fifo,
                       priority_exponent: 1.0, max_times_sampled: 0, max_chunks_per_item: 8, rate_limiter: None }
    }
}

/// What [`Client::writer`] opens.
#[derive(Clone, Debug)]
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
        WriterOptions { columns, chunk_length: 1, max_item_steps: 0, insert_timeout_ms: -1, keep_keys: false }
    }
}

/// What to sample.
#[derive(Clone, Copy, Debug)]
pub struct SampleOptions {
    /// Items per batch.
    pub batch_size: u32,
    /// Steps per item (every item sampled must have as many); default 1.
    pub num_steps: u32,
    /// Wait for the rate limiter: -1 for ever (default), 0 not at all.
    pub timeout_ms: i32,
}

impl SampleOptions {
    /// Batches of `batch_size` one-step items, waiting for ever.
    pub fn new(batch_size: u32) -> SampleOptions {
        SampleOptions { batch_size, num_steps: 1, timeout_ms: -1 }
    }
    fn c(&self) -> sys::engram_sample_options {
        let mut o = unsafe { std::mem::zeroed::<sys::engram_sample_options>() };
        unsafe { sys::engram_sample_options_init(&mut o) };
        o.batch_size = self.batch_size;
        o.num_steps = self.num_steps;
        o.timeout_ms = self.timeout_ms;
        o
    }
}

/// A table's size, counters and settings ([`Client::table_info`]).
#[derive(Clone, Debug)]
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
}

// --- server and client --------------------------------------------------------------

/// An engram server inside this process; other processes attach to it as
/// to engramd. Stopped on drop (its clients then get ENGRAM_E_DISCONNECTED).
pub struct Server {
    ptr: *mut sys::engram_server,
}

// engram_server_start and _stop may be called from any thread.
unsafe impl Send for Server {}
unsafe impl Sync for Server {}

impl Server {
    /// Starts one on `socket` with the default configuration.
    pub fn start(socket: &str) -> Result<Server> {
        Server::start_with(Some(socket), None)
    }
    /// Starts one with an engramd.toml(5) text (`config_toml`), on `socket`
    /// (None: the config's, $ENGRAM_SOCKET, /run/engram/engram.sock).
    pub fn start_with(socket: Option<&str>, config_toml: Option<&str>) -> Result<Server> {
        let socket = socket.map(|s| c_string(s, "socket path")).transpose()?;
        let toml = config_toml.map(|s| c_string(s, "config")).transpose()?;
        let mut o = unsafe { std::mem::zeroed::<sys::engram_server_options>() };
        unsafe { sys::engram_server_options_init(&mut o) };
        o.socket_path = socket.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        o.config_toml = toml.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        o.quiet = 1;
        let mut ptr = ptr::null_mut();
        check(unsafe { sys::engram_server_start(&o, &mut ptr) })?;
        Ok(Server { ptr })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        unsafe { sys::engram_server_stop(self.ptr) };
    }
}

/// A connection to a server. Disconnected on drop, after every handle
/// that borrows it is gone.
pub struct Client {
    ptr: *mut sys::engram_client,
}

// A client and its handles may be used by one thread at a time: it may
// move (Send), not be shared (no Sync); handles borrow it, so they stay on
// the thread that has it.
unsafe impl Send for Client {}

impl Client {
    /// Connects to `socket` (None: $ENGRAM_SOCKET, else /run/engram/engram.sock).
    pub fn connect(socket: Option<&str>) -> Result<Client> {
        let socket = socket.map(|s| c_string(s, "socket path")).transpose()?;
        let mut o = unsafe { std::mem::zeroed::<sys::engram_connect_options>() };
        unsafe { sys::engram_connect_options_init(&mut o) };
        o.socket_path = socket.as_ref().map_or(ptr::null(), |s| s.as_ptr());
        let mut ptr = ptr::null_mut();
        check(unsafe { sys::engram_connect(&o, &mut ptr) })?;
        Ok(Client { ptr })
    }

    /// After ENGRAM_E_DISCONNECTED (the server restarted): connects again
    /// to `socket`, replacing this connection. Taking `&mut self`, it can
    /// only be called when no table, writer or batch of the old one lives.
    pub fn reconnect(&mut self, socket: Option<&str>) -> Result<()> {
        let fresh = Client::connect(socket)?;
        *self = fresh; // drops the old connection
        Ok(())
    }

    /// Creates a table.
    pub fn create_table(&self, o: &TableOptions) -> Result<()> {
        let name = c_string(&o.name, "table name")?;
        let cols = c_columns(&o.columns)?;
        let mut c = unsafe { std::mem::zeroed::<sys::engram_table_options>() };
        unsafe { sys::engram_table_options_init(&mut c) };
        c.name = name.as_ptr();
        c.max_size = o.max_size;
        c.sampler = o.sampler as i32;
        c.remover = o.remover as i32;
        c.priority_exponent = o.priority_exponent;
        c.max_times_sampled = o.max_times_sampled;
        c.max_chunks_per_item = o.max_chunks_per_item;
        if let Some(r) = o.rate_limiter {
            c.rate_limiter = r.0;
        }
        c.columns = cols.cols.as_ptr();
        c.num_columns = cols.cols.len() as u32;
        check(unsafe { sys::engram_table_create(self.ptr, &c) })
    }

    /// Opens a table for writing items and sampling.
    pub fn open_table(&self, name: &str) -> Result<Table<'_>> {
        let n = c_string(name, "table name")?;
        let mut ptr = ptr::null_mut();
        check(unsafe { sys::engram_table_open(self.ptr, n.as_ptr(), &mut ptr) })?;
        let mut cols = [sys::engram_column { name: ptr::null(), dtype: 0, rank: 0, shape: [0; sys::ENGRAM_MAX_RANK] };
            sys::ENGRAM_MAX_COLUMNS];
        let mut count = 0u32;
        let rc = unsafe { sys::engram_table_columns(ptr, cols.as_mut_ptr(), cols.len() as u32, &mut count) };
        if rc != sys::ENGRAM_OK {
            let e = Error::last(rc);
            unsafe { sys::engram_table_close(ptr) };
            return Err(e);
        }
        let columns = cols[..count as usize]
            .iter()
            .map(|c| Column {
                name: unsafe { CStr::from_ptr(c.name) }.to_string_lossy().into_owned(),
                dtype: Dtype::from_code(c.dtype).unwrap_or(Dtype::U8),
                shape: c.shape[..c.rank as usize].to_vec(),
            })
            .collect();
        Ok(Table { ptr, client: self, name: name.to_string(), columns, begun: Cell::new(None) })
    }

    /// Opens a writer of steps.
    pub fn writer(&self, o: &WriterOptions) -> Result<Writer<'_>> {
        let cols = c_columns(&o.columns)?;
        let mut c = unsafe { std::mem::zeroed::<sys::engram_writer_options>() };
        unsafe { sys::engram_writer_options_init(&mut c) };
        c.columns = cols.cols.as_ptr();
        c.num_columns = cols.cols.len() as u32;
        c.chunk_length = o.chunk_length;
        c.max_item_steps = o.max_item_steps;
        c.insert_timeout_ms = o.insert_timeout_ms;
        c.keep_keys = o.keep_keys as i32;
        let mut ptr = ptr::null_mut();
        check(unsafe { sys::engram_writer_open(self.ptr, &c, &mut ptr) })?;
        Ok(Writer { ptr, client: self, columns: o.columns.clone(), ptrs: vec![ptr::null(); o.columns.len()] })
    }

    /// A table's size, counters and rate limiter.
    pub fn table_info(&self, name: &str) -> Result<TableInfo> {
        let n = c_string(name, "table name")?;
        let mut i = unsafe { std::mem::zeroed::<sys::engram_table_info>() };
        unsafe { sys::engram_table_info_init(&mut i) };
        check(unsafe { sys::engram_table_info_get(self.ptr, n.as_ptr(), &mut i) })?;
        Ok(TableInfo {
            name: unsafe { CStr::from_ptr(i.name.as_ptr()) }.to_string_lossy().into_owned(),
            max_size: i.max_size,
            size: i.size,
            inserts: i.inserts,
            samples: i.samples,
            deletes: i.deletes,
            updates: i.updates,
            evictions: i.evictions,
            clients: i.clients,
            rate_limiter: RateLimiter(i.rate_limiter),
        })
    }

    /// Deletes a table and its items.
    pub fn drop_table(&self, name: &str) -> Result<()> {
        let n = c_string(name, "table name")?;
        check(unsafe { sys::engram_table_drop(self.ptr, n.as_ptr()) })
    }

    /// Removes every item of a table and zeroes its counters.
    pub fn reset_table(&self, name: &str) -> Result<()> {
        let n = c_string(name, "table name")?;
        check(unsafe { sys::engram_table_reset(self.ptr, n.as_ptr()) })
    }

    /// Changes a table's rate limiter at run time.
    pub fn set_rate_limiter(&self, name: &str, r: &RateLimiter) -> Result<()> {
        let n = c_string(name, "table name")?;
        check(unsafe { sys::engram_table_set_rate_limiter(self.ptr, n.as_ptr(), &r.0) })
    }

    /// Writes a checkpoint of every table now; returns its path.
    pub fn checkpoint(&self, timeout_ms: i32) -> Result<String> {
        let mut buf = vec![0 as c_char; 4096];
        check(unsafe { sys::engram_checkpoint(self.ptr, timeout_ms, buf.as_mut_ptr(), buf.len()) })?;
        Ok(unsafe { CStr::from_ptr(buf.as_ptr()) }.to_string_lossy().into_owned())
    }

    /// A handle that ends this client's blocking call from another thread.
    pub fn interrupter(&self) -> Interrupter<'_> {
        Interrupter { ptr: self.ptr, _client: PhantomData }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        unsafe { sys::engram_disconnect(self.ptr) };
    }
}

/// Ends the blocking call of its client (a sample, or a writer held by a
/// rate limiter) with ENGRAM_E_INTERRUPTED within about 100 ms; see
/// engram_client_interrupt(3). Usable from any thread while the client lives.
pub struct Interrupter<'c> {
    ptr: *mut sys::engram_client,
    _client: PhantomData<&'c Client>,
}

// engram_client_interrupt is thread-safe and async-signal-safe; the
// borrow keeps the client alive.
unsafe impl Send for Interrupter<'_> {}
unsafe impl Sync for Interrupter<'_> {}

impl Interrupter<'_> {
    /// Interrupts the client's current (or next) wait.
    pub fn interrupt(&self) {
        unsafe { sys::engram_client_interrupt(self.ptr) };
    }
}

// --- tables and sampling ----------------------------------------------------------------

/// An open table: sampling, priority updates, deletes; writers insert into it.
pub struct Table<'c> {
    ptr: *mut sys::engram_table,
    client: &'c Client,
    name: String,
    columns: Vec<Column>,
    begun: Cell<Option<(u32, u32)>>, // batch_size and num_steps of the sample begun
}

impl<'c> Table<'c> {
    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The table's signature.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// Samples a batch and copies it out into buffers of its own.
    pub fn sample(&self, o: &SampleOptions) -> Result<Sample> {
        let c = o.c();
        self.copy_out(o.batch_size, o.num_steps, |bufs, infos, count| unsafe {
            sys::engram_sample(self.ptr, &c, bufs, infos, count)
        })
    }

    /// Sends a sample request and returns without waiting: the server draws
    /// the batch while the caller goes on, and [`Table::sample_end`] copies it
    /// out. The batch sees every earlier call on this table and none later.
    /// One at a time per table; the timeout counts from this call.
    pub fn sample_begin(&self, o: &SampleOptions) -> Result<()> {
        let c = o.c();
        check(unsafe { sys::engram_sample_begin(self.ptr, &c) })?;
        self.begun.set(Some((o.batch_size, o.num_steps)));
        Ok(())
    }

    /// Waits for the sample begun by [`Table::sample_begin`] and copies it
    /// out, as [`Table::sample`] does.
    pub fn sample_end(&self) -> Result<Sample> {
        let (batch_size, num_steps) = self.begun.take().ok_or_else(|| {
            Error::new(sys::ENGRAM_E_INVALID, format!("no sample was begun on table {}: call sample_begin first", self.name))
        })?;
        self.copy_out(batch_size, num_steps, |bufs, infos, count| unsafe {
            sys::engram_sample_end(self.ptr, bufs, infos, count)
        })
    }

    // Buffers of its own for a batch, filled by `call` (engram_sample or
    // engram_sample_end).
    fn copy_out<F>(&self, batch_size: u32, num_steps: u32, call: F) -> Result<Sample>
    where
        F: FnOnce(*const *mut c_void, *mut sys::engram_sample_info, *mut u32) -> c_int,
    {
        let per_item: Vec<usize> = self.columns.iter().map(|c| c.step_bytes() * num_steps as usize).collect();
        // u64 words: every column starts 8-byte aligned, for typed access.
        let mut data = Vec::with_capacity(per_item.len());
        for &b in &per_item {
            data.push(zeroed::<u64>((b * batch_size as usize + 7) / 8, batch_size)?);
        }
        let bufs: Vec<*mut c_void> = data.iter_mut().map(|d| d.as_mut_ptr() as *mut c_void).collect();
        let mut infos = zeroed::<SampleInfo>(batch_size as usize, batch_size)?;
        let mut count = 0u32;
        check(call(bufs.as_ptr(), infos.as_mut_ptr(), &mut count))?;
        infos.truncate(count as usize);
        Ok(Sample { columns: self.columns.clone(), data, per_item, infos })
    }

    /// Samples into the caller's buffers, one per column, each of at least
    /// batch_size * num_steps * step bytes ([batch, steps, ...shape]); returns
    /// the items delivered. Buffers too small are refused (ENGRAM_E_RANGE)
    /// before anything is sampled.
    pub fn sample_into(&self, o: &SampleOptions, buffers: &mut [&mut [u8]], infos: &mut [SampleInfo]) -> Result<usize> {
        if buffers.len() != self.columns.len() {
            return Err(Error::new(sys::ENGRAM_E_INVALID,
                                  format!("{} buffers for {} columns", buffers.len(), self.columns.len())));
        }
        for (b, c) in buffers.iter().zip(&self.columns) {
            let need = c.step_bytes() * o.num_steps as usize * o.batch_size as usize;
            if b.len() < need {
                return Err(Error::new(sys::ENGRAM_E_RANGE,
                                      format!("column {}: buffer of {} bytes, a batch needs {}", c.name, b.len(), need)));
            }
        }
        if infos.len() < o.batch_size as usize {
            return Err(Error::new(sys::ENGRAM_E_RANGE, format!("{} infos for a batch of {}", infos.len(), o.batch_size)));
        }
        let bufs: Vec<*mut c_void> = buffers.iter_mut().map(|b| b.as_mut_ptr() as *mut c_void).collect();
        let mut count = 0u32;
        let c = o.c();
        check(unsafe { sys::engram_sample(self.ptr, &c, bufs.as_ptr(), infos.as_mut_ptr(), &mut count) })?;
        Ok(count as usize)
    }

    /// Samples a batch without copying: its data stays pinned in shared
    /// memory, read-only, while the [`Batch`] lives.
    pub fn sample_view(&self, o: &SampleOptions) -> Result<Batch<'_>> {
        let mut ptr = ptr::null_mut();
        let c = o.c();
        check(unsafe { sys::engram_sample_view(self.ptr, &c, &mut ptr) })?;
        Ok(Batch { ptr, columns: &self.columns })
    }

    /// Sets priorities by key; per key ENGRAM_OK, ENGRAM_E_STALE_KEY or ENGRAM_E_UNKNOWN_KEY.
    pub fn update_priorities(&self, keys: &[u64], priorities: &[f64]) -> Result<Vec<i32>> {
        if keys.len() != priorities.len() {
            return Err(Error::new(sys::ENGRAM_E_INVALID,
                                  format!("{} keys but {} priorities", keys.len(), priorities.len())));
        }
        let mut results = vec![0i32; keys.len()];
        check(unsafe {
            sys::engram_update_priorities(self.ptr, keys.as_ptr(), priorities.as_ptr(), keys.len(), results.as_mut_ptr())
        })?;
        Ok(results)
    }

    /// Sends priorities by key without waiting for the server's answer (keys of
    /// items that are gone are skipped). Later calls on this table see them
    /// applied; a refusal is the error of the next priority call, and
    /// `update_priorities(&[], &[])` waits until every one is applied.
    pub fn update_priorities_async(&self, keys: &[u64], priorities: &[f64]) -> Result<()> {
        if keys.len() != priorities.len() {
            return Err(Error::new(sys::ENGRAM_E_INVALID,
                                  format!("{} keys but {} priorities", keys.len(), priorities.len())));
        }
        check(unsafe {
            sys::engram_update_priorities_async(self.ptr, keys.as_ptr(), priorities.as_ptr(), keys.len())
        })
    }

    /// Deletes items by key; results as for update_priorities.
    pub fn delete_items(&self, keys: &[u64]) -> Result<Vec<i32>> {
        let mut results = vec![0i32; keys.len()];
        check(unsafe { sys::engram_delete_items(self.ptr, keys.as_ptr(), keys.len(), results.as_mut_ptr()) })?;
        Ok(results)
    }
}

impl Drop for Table<'_> {
    fn drop(&mut self) {
        unsafe { sys::engram_table_close(self.ptr) };
    }
}

/// Column `i` of `columns`, if it exists (else ENGRAM_E_RANGE) and holds
/// T's values (else ENGRAM_E_SIGNATURE): the check before any typed view.
/// `n` zeroed values (`T` plain numbers, for which zero bytes are a value),
/// or ENGRAM_E_NOMEM if this process cannot have them: `vec!` would abort
/// the process for a careless batch_size (u32::MAX infos are 128 GiB)
/// before the server could refuse it. Zeroed as `vec![0; n]` is, by the
/// allocator (calloc), so a large batch costs no memset here.
fn zeroed<T: Copy>(n: usize, batch_size: u32) -> Result<Vec<T>> {
    let nomem = || {
        Error::new(sys::ENGRAM_E_NOMEM, format!("a sample of batch_size {} does not fit this process's memory", batch_size))
    };
    if n == 0 || std::mem::size_of::<T>() == 0 {
        return Ok(Vec::new());
    }
    let layout = std::alloc::Layout::array::<T>(n).map_err(|_| nomem())?;
    let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
    if p.is_null() {
        return Err(nomem());
    }
    // The global allocator's block of exactly `n` T, as Vec frees it.
    Ok(unsafe { Vec::from_raw_parts(p, n, n) })
}

fn typed_column<T: Element>(columns: &[Column], i: usize) -> Result<&Column> {
    let c = columns.get(i).ok_or_else(|| Error::new(sys::ENGRAM_E_RANGE, format!("no column {}", i)))?;
    if c.dtype != T::DTYPE {
        return Err(Error::new(sys::ENGRAM_E_SIGNATURE,
                              format!("column {} holds {:?}, not {:?}", c.name, c.dtype, T::DTYPE)));
    }
    Ok(c)
}

/// A copied sample: per column, [items, steps, ...shape] values.
pub struct Sample {
    columns: Vec<Column>,
    data: Vec<Vec<u64>>,
    per_item: Vec<usize>,
    infos: Vec<SampleInfo>,
}

impl Sample {
    /// Items delivered.
    pub fn len(&self) -> usize {
        self.infos.len()
    }
    /// No items (only when max_times_sampled emptied the table).
    pub fn is_empty(&self) -> bool {
        self.infos.is_empty()
    }
    /// Key, priority, probability, times sampled, table size, per item.
    pub fn infos(&self) -> &[SampleInfo] {
        &self.infos
    }
    /// Column `i`'s bytes for the items delivered.
    pub fn column_bytes(&self, i: usize) -> &[u8] {
        let d = &self.data[i];
        let all = unsafe { std::slice::from_raw_parts(d.as_ptr() as *const u8, d.len() * 8) };
        &all[..self.per_item[i] * self.len()]
    }
    /// Column `i` as values of its type (ENGRAM_E_SIGNATURE if T is not it).
    pub fn column<T: Element>(&self, i: usize) -> Result<&[T]> {
        typed_column::<T>(&self.columns, i)?;
        let b = self.column_bytes(i);
        // Aligned: the buffer is u64 words; sized: whole values.
        Ok(unsafe { std::slice::from_raw_parts(b.as_ptr() as *const T, b.len() / std::mem::size_of::<T>()) })
    }
}

/// A zero-copy sample, pinned in shared memory until dropped. The slices
/// it hands out borrow it.
pub struct Batch<'t> {
    ptr: *mut sys::engram_batch,
    columns: &'t [Column],
}

impl Batch<'_> {
    /// Items in the batch.
    pub fn len(&self) -> usize {
        unsafe { sys::engram_batch_size(self.ptr) as usize }
    }
    /// No items.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `item` as the C index, if the batch has it: a plain `as u32` would
    /// turn item 2^32 into item 0.
    fn item(&self, item: usize) -> Result<u32> {
        let n = self.len();
        if item >= n {
            return Err(Error::new(sys::ENGRAM_E_RANGE, format!("item {} of a batch of {}", item, n)));
        }
        Ok(item as u32)
    }
    /// Key, priority, probability, times sampled, table size of one item.
    pub fn info(&self, item: usize) -> Result<SampleInfo> {
        let item = self.item(item)?;
        let mut i = SampleInfo::default();
        check(unsafe { sys::engram_batch_info(self.ptr, item, &mut i) })?;
        Ok(i)
    }
    /// The pieces of an item's column, one per chunk it spans, as bytes.
    pub fn view_bytes(&self, item: usize, column: usize) -> Result<Vec<&[u8]>> {
        let c = self.columns.get(column).ok_or_else(|| Error::new(sys::ENGRAM_E_RANGE, format!("no column {}", column)))?;
        let item = self.item(item)?;
        let mut views = [sys::engram_view { data: ptr::null(), steps: 0 }; 8];
        let mut n = 0u32;
        check(unsafe { sys::engram_batch_views(self.ptr, item, column as u32, views.as_mut_ptr(), 8, &mut n) })?;
        Ok(views[..n as usize]
            .iter()
            .map(|v| unsafe { std::slice::from_raw_parts(v.data as *const u8, v.steps as usize * c.step_bytes()) })
            .collect())
    }
    /// The pieces of an item's column as values of its type.
    pub fn views<T: Element>(&self, item: usize, column: usize) -> Result<Vec<&[T]>> {
        typed_column::<T>(self.columns, column)?;
        Ok(self
            .view_bytes(item, column)?
            .into_iter()
            // Columns start on 64-byte boundaries in a chunk, so each piece is aligned.
            .map(|b| unsafe { std::slice::from_raw_parts(b.as_ptr() as *const T, b.len() / std::mem::size_of::<T>()) })
            .collect())
    }
}

impl Drop for Batch<'_> {
    fn drop(&mut self) {
        unsafe { sys::engram_batch_release(self.ptr) };
    }
}

// --- writing ----------------------------------------------------------------------------------

/// Appends steps into shared memory and creates items over them.
pub struct Writer<'c> {
    ptr: *mut sys::engram_writer,
    client: &'c Client,
    columns: Vec<Column>,
    ptrs: Vec<*const c_void>,
}

impl Writer<'_> {
    fn point(&mut self, columns: &[&[u8]], steps: usize) -> Result<()> {
        if columns.len() != self.columns.len() {
            return Err(Error::new(sys::ENGRAM_E_INVALID,
                                  format!("{} columns given; the writer has {}", columns.len(), self.columns.len())));
        }
        for (i, (v, c)) in columns.iter().zip(&self.columns).enumerate() {
            if v.len() != c.step_bytes() * steps {
                return Err(Error::new(sys::ENGRAM_E_RANGE, format!("column {}: {} bytes, {} steps of it are {}",
                                                                   c.name, v.len(), steps, c.step_bytes() * steps)));
            }
            self.ptrs[i] = v.as_ptr() as *const c_void;
        }
        Ok(())
    }

    /// Appends one step: for each column, exactly one value's bytes (see [`bytes`]).
    pub fn append(&mut self, columns: &[&[u8]]) -> Result<()> {
        self.point(columns, 1)?;
        check(unsafe { sys::engram_writer_append(self.ptr, self.ptrs.as_ptr()) })
    }

    /// Appends n steps: for each column, n consecutive values' bytes.
    pub fn append_batch(&mut self, columns: &[&[u8]], n: u32) -> Result<()> {
        self.point(columns, n as usize)?;
        check(unsafe { sys::engram_writer_append_batch(self.ptr, self.ptrs.as_ptr(), n) })
    }

    /// Appends n steps (each column's bytes for n steps) and after each
    /// creates an item over the last `num_steps` steps in `table`, with
    /// `priorities[k]` (None: 1.0): one call for the batch
    /// (engram_writer_append_items).
    pub fn append_items(&mut self, columns: &[&[u8]], n: u32, table: &Table<'_>, num_steps: u32,
                        priorities: Option<&[f64]>) -> Result<()> {
        if !ptr::eq(table.client, self.client) {
            return Err(Error::new(sys::ENGRAM_E_INVALID, "the table was opened by another client than the writer's"));
        }
        if let Some(p) = priorities {
            if p.len() != n as usize {
                return Err(Error::new(sys::ENGRAM_E_RANGE, format!("{} priorities for {} steps", p.len(), n)));
            }
        }
        self.point(columns, n as usize)?;
        let p = priorities.map_or(ptr::null(), |p| p.as_ptr());
        check(unsafe { sys::engram_writer_append_items(self.ptr, self.ptrs.as_ptr(), n, table.ptr, num_steps, p) })
    }

    /// Creates an item over the last `num_steps` steps in `table` (of the same client).
    pub fn create_item(&mut self, table: &Table<'_>, num_steps: u32, priority: f64) -> Result<()> {
        if !ptr::eq(table.client, self.client) {
            return Err(Error::new(sys::ENGRAM_E_INVALID, "the table was opened by another client than the writer's"));
        }
        check(unsafe { sys::engram_writer_create_item(self.ptr, table.ptr, num_steps, priority) })
    }

    /// Ends the episode: later items never reach back into it.
    pub fn end_episode(&mut self) -> Result<()> {
        check(unsafe { sys::engram_writer_end_episode(self.ptr) })
    }

    /// Sends what is pending and waits up to timeout_ms (-1: for ever) until
    /// every item is applied or refused; returns the first refusal.
    pub fn flush(&mut self, timeout_ms: i32) -> Result<()> {
        check(unsafe { sys::engram_writer_flush(self.ptr, timeout_ms) })
    }

    /// With keep_keys: the keys of applied items, in creation order.
    pub fn take_keys(&mut self) -> Result<Vec<u64>> {
        let mut all = Vec::new();
        loop {
            let mut buf = [0u64; 1024];
            let mut n = 0usize;
            check(unsafe { sys::engram_writer_take_keys(self.ptr, buf.as_mut_ptr(), buf.len(), &mut n) })?;
            all.extend_from_slice(&buf[..n]);
            if n < buf.len() {
                return Ok(all);
            }
        }
    }
}

impl Drop for Writer<'_> {
    fn drop(&mut self) {
        unsafe { sys::engram_writer_close(self.ptr) };
    }
}

/// The README's Rust snippet, compiled as a doctest so that it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../../README.md")]
pub struct ReadmeSnippets;
