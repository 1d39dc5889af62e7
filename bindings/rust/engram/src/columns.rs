//! Columns: dtypes, the [`Element`] types that map to them, and a table's
//! signature as C wants it.
use super::*;

/// Element type of a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let frame = engram::Column::new("frame", engram::Dtype::U8, &[84, 84]);
/// assert_eq!(engram::Dtype::F32.size(), 4);
/// assert_eq!(frame.step_bytes(), 84 * 84);
/// # Ok(()) }
/// ```
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
    pub(crate) fn from_code(code: i32) -> Option<Dtype> {
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
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let client = engram::Client::connect(None)?;
/// let table = client.open_table("replay")?;
/// let sample = table.sample(&engram::SampleOptions::new(32))?;
/// let obs: &[f32] = sample.column(0)?; // f32 is an Element: column 0 must be Dtype::F32
/// # Ok(()) }
/// ```
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
///
/// ```no_run
/// # fn main() -> Result<(), engram::Error> {
/// let columns = vec![
///     engram::Column::new("obs", engram::Dtype::F32, &[4]),  // 4 floats a step
///     engram::Column::new("action", engram::Dtype::I32, &[]), // a scalar
/// ];
/// assert_eq!(columns[0].step_bytes(), 16);
/// # Ok(()) }
/// ```
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
pub(crate) struct CColumns {
    pub(crate) _names: Vec<CString>,
    pub(crate) cols: Vec<sys::engram_column>,
}

pub(crate) fn c_columns(columns: &[Column]) -> Result<CColumns> {
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
