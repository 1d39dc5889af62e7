//! [`Server`], the server embedded in this process (libengram-server), and
//! [`Client`], a connection, with its [`Interrupter`].
use super::*;

/// An engram server inside this process; other processes attach to it as
/// to engramd. Stopped on drop (its clients then get ENGRAM_E_DISCONNECTED).
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let server = engram::Server::start("/tmp/engram-example.sock")?; // in this process, its own threads
/// let client = engram::Client::connect(Some("/tmp/engram-example.sock"))?;
/// # Ok(()) }
/// ```
pub struct Server {
    pub(crate) ptr: *mut sys::engram_server,
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
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?; // $ENGRAM_SOCKET or /run/engram/engram.sock
/// let info = client.table_info("replay")?;
/// println!("{} of {} items", info.size, info.max_size);
/// # Ok(()) }
/// ```
pub struct Client {
    pub(crate) ptr: *mut sys::engram_client,
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
            max_priority: i.max_priority,
            min_priority: i.min_priority,
            shards: i.shards,
            shards_present: i.shards_present,
        })
    }

    /// Every item of a table: oldest first, or with `by_priority` highest
    /// first (equal priorities oldest first). Writers and samplers go on
    /// meanwhile; every item held throughout is listed once, none twice
    /// (engram_items_open(3)).
    pub fn items(&self, name: &str, by_priority: bool) -> Result<Vec<Item>> {
        let n = c_string(name, "table name")?;
        let order = if by_priority { sys::ENGRAM_BY_PRIORITY } else { sys::ENGRAM_BY_INSERTION };
        let mut it: *mut sys::engram_items = ptr::null_mut();
        check(unsafe { sys::engram_items_open(self.ptr, n.as_ptr(), order, &mut it) })?;
        let count = unsafe { sys::engram_items_count(it) } as usize;
        let mut out = vec![Item::default(); count];
        let mut got = 0u32;
        let r = check(unsafe { sys::engram_items_next(it, out.as_mut_ptr(), count as u32, &mut got) });
        unsafe { sys::engram_items_close(it) };
        r?;
        out.truncate(got as usize);
        Ok(out)
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
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let table = client.open_table("queue")?;
/// let stop = client.interrupter();
/// std::thread::scope(|s| {
///     s.spawn(|| {
///         std::thread::sleep(std::time::Duration::from_secs(1));
///         stop.interrupt(); // the sample below returns ENGRAM_E_INTERRUPTED
///     });
///     let _ = table.sample(&engram::SampleOptions::new(32));
/// });
/// # Ok(()) }
/// ```
pub struct Interrupter<'c> {
    pub(crate) ptr: *mut sys::engram_client,
    pub(crate) _client: PhantomData<&'c Client>,
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
