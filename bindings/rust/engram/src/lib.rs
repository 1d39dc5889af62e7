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

// What every module takes with `use super::*`.
use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

use engram_sys as sys;

pub use sys::engram_item as Item;
pub use sys::engram_sample_info as SampleInfo;

// One module per concept; every public name is the crate's.
mod client;
mod columns;
mod error;
mod options;
mod table;
mod writer;

pub use client::*;
pub use columns::*;
pub use error::*;
pub use options::*;
pub use table::*;
pub use writer::*;
// What the modules share inside the crate.
use columns::c_columns;
use error::{c_string, check};

/// The loaded libengram's version, "MAJOR.MINOR.PATCH".
pub fn version() -> String {
    unsafe { CStr::from_ptr(sys::engram_version_string()) }.to_string_lossy().into_owned()
}

/// The README's Rust snippet, compiled as a doctest so that it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../../README.md")]
pub struct ReadmeSnippets;
