//! [`Table`]: sampling (a copied [`Sample`] or a zero-copy [`Batch`]),
//! priority updates and deletes.
use super::*;

/// An open table: sampling, priority updates, deletes; writers insert into it.
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let table = client.open_table("replay")?;
/// let sample = table.sample(&engram::SampleOptions::new(32))?;
/// let keys: Vec<u64> = sample.infos().iter().map(|i| i.key).collect();
/// table.update_priorities(&keys, &vec![0.5; keys.len()])?;
/// # Ok(()) }
/// ```
pub struct Table<'c> {
    pub(crate) ptr: *mut sys::engram_table,
    pub(crate) client: &'c Client,
    pub(crate) name: String,
    pub(crate) columns: Vec<Column>,
    pub(crate) begun: Cell<Option<(u32, u32)>>, // batch_size and num_steps of the sample begun
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

    /// Writes every item the table holds now to `path`, a NumPy .npz file
    /// (engram-export(5)) that numpy alone reads; writers and samplers go
    /// on meanwhile, and a failed export leaves no file. Returns the items
    /// written (engram_table_export(3)).
    ///
    /// ```no_run
    /// # fn main() -> engram::Result<()> {
    /// let client = engram::Client::connect(None)?;
    /// let table = client.open_table("replay")?;
    /// let n = table.export("/tmp/replay.npz")?;
    /// println!("{} items exported", n);
    /// # Ok(())
    /// # }
    /// ```
    pub fn export(&self, path: &str) -> Result<u64> {
        self.transfer(path, -1, sys::engram_table_export)
    }

    /// Inserts the items of an .npz file (one that `export` wrote, or one
    /// saved with numpy's np.savez holding the same arrays) into this
    /// table through a writer; each keeps its steps and priority and gets
    /// a new key. A damaged or foreign file inserts nothing.
    /// `insert_timeout_ms` bounds each item's wait for the rate limiter
    /// (-1: none). Returns the items inserted (engram_table_import(3)).
    pub fn import(&self, path: &str, insert_timeout_ms: i32) -> Result<u64> {
        self.transfer(path, insert_timeout_ms, sys::engram_table_import)
    }

    fn transfer(
        &self,
        path: &str,
        insert_timeout_ms: i32,
        f: unsafe extern "C" fn(*mut sys::engram_table, *const std::os::raw::c_char,
                                *const sys::engram_transfer_options, *mut u64) -> std::os::raw::c_int,
    ) -> Result<u64> {
        let p = c_string(path, "path")?;
        let mut o = std::mem::MaybeUninit::<sys::engram_transfer_options>::uninit();
        let mut o = unsafe {
            sys::engram_transfer_options_init(o.as_mut_ptr());
            o.assume_init()
        };
        o.insert_timeout_ms = insert_timeout_ms;
        let mut n = 0u64;
        check(unsafe { f(self.ptr, p.as_ptr(), &o, &mut n) })?;
        Ok(n)
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
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let table = client.open_table("replay")?;
/// let sample = table.sample(&engram::SampleOptions::new(32))?;
/// let obs: &[f32] = sample.column(0)?; // [len, num_steps, ...shape]
/// for info in sample.infos() {
///     println!("key {:#x} drawn with probability {}", info.key, info.probability);
/// }
/// # Ok(()) }
/// ```
pub struct Sample {
    pub(crate) columns: Vec<Column>,
    pub(crate) data: Vec<Vec<u64>>,
    pub(crate) per_item: Vec<usize>,
    pub(crate) infos: Vec<SampleInfo>,
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
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let table = client.open_table("replay")?;
/// let batch = table.sample_view(&engram::SampleOptions::new(32))?; // zero-copy, pinned until dropped
/// for item in 0..batch.len() {
///     let obs: Vec<&[f32]> = batch.views(item, 0)?; // one slice per chunk the item spans
/// }
/// # Ok(()) }
/// ```
///
/// A slice cannot outlive its batch, so it never shows bytes that are not
/// its item's: the compiler refuses a view kept past the batch's drop.
///
/// ```compile_fail,E0597
/// # fn main() -> Result<(), engram::Error> {
/// # let client = engram::Client::connect(None)?;
/// # let table = client.open_table("replay")?;
/// let kept: &[f32] = {
///     let batch = table.sample_view(&engram::SampleOptions::new(1))?;
///     batch.views::<f32>(0, 0)?[0]
/// }; // batch dropped (unpinned) here: `batch` does not live long enough
/// # let _ = kept;
/// # Ok(()) }
/// ```
pub struct Batch<'t> {
    pub(crate) ptr: *mut sys::engram_batch,
    pub(crate) columns: &'t [Column],
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
