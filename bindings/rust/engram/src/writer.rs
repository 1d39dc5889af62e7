//! [`Writer`]: steps, and the items over them.
use super::*;

/// Appends steps into shared memory and creates items over them.
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let table = client.open_table("replay")?;
/// let columns = vec![engram::Column::new("obs", engram::Dtype::F32, &[4])];
/// let mut writer = client.writer(&engram::WriterOptions::new(columns))?;
/// writer.append(&[engram::bytes(&[0.0f32, 1.0, 2.0, 3.0])])?;
/// writer.create_item(&table, 1, 1.0)?;
/// writer.flush(-1)?;
/// # Ok(()) }
/// ```
pub struct Writer<'c> {
    pub(crate) ptr: *mut sys::engram_writer,
    pub(crate) client: &'c Client,
    pub(crate) columns: Vec<Column>,
    pub(crate) ptrs: Vec<*const c_void>,
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

    /// Creates an item over the last `num_steps` steps in `table`, at the
    /// table's largest priority when the server applies it (1.0 in an
    /// empty table).
    pub fn create_item_at_max(&mut self, table: &Table<'_>, num_steps: u32) -> Result<()> {
        if !ptr::eq(table.client, self.client) {
            return Err(Error::new(sys::ENGRAM_E_INVALID, "the table was opened by another client than the writer's"));
        }
        check(unsafe { sys::engram_writer_create_item_at_max(self.ptr, table.ptr, num_steps) })
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
