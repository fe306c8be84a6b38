//! A safe wrapper over libchatparse: `Tables` and `Parser` free their C handles on drop, a parser borrows
//! its tables (so it cannot outlive them), and every failure is an `Error` carrying the Python exception
//! class chatparse raises for the same condition and its message.

use std::ffi::CStr;
use std::fmt;
use std::marker::PhantomData;
use std::os::raw::c_char;
use std::ptr::{self, NonNull};

use crate::ffi;

/// A failed library call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The Python exception class ("ValueError", "RuntimeError", ...).
    pub exception: String,
    /// str() of that exception, byte for byte.
    pub message: String,
}

impl Error {
    fn from_raw(err: &ffi::cp_error) -> Self {
        let text = |chars: &[c_char]| {
            // SAFETY: the library NUL-terminates both fields inside their arrays (the struct was zeroed).
            let s = unsafe { CStr::from_ptr(chars.as_ptr()) };
            s.to_string_lossy().into_owned()
        };
        Error {
            exception: text(&err.exception),
            message: text(&err.message),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.exception, self.message)
    }
}

impl std::error::Error for Error {}

/// Copy a string the library returned and free it; NULL is the error `err` describes.
///
/// SAFETY: `text` is NULL or a pointer from the library to at least `len` bytes, freed with cp_free.
unsafe fn take(text: *mut c_char, len: usize, err: &ffi::cp_error) -> Result<String, Error> {
    if text.is_null() {
        return Err(Error::from_raw(err));
    }
    let bytes = std::slice::from_raw_parts(text as *const u8, len).to_vec();
    ffi::cp_free(text.cast());
    // The library writes JSON with ensure_ascii, so this never fails; report it as Python would if it did.
    String::from_utf8(bytes).map_err(|e| Error {
        exception: "UnicodeDecodeError".into(),
        message: e.to_string(),
    })
}

/// Loaded, validated tables (one `.cpt` file). Read-only: shareable between threads.
pub struct Tables {
    raw: NonNull<ffi::cp_tables>,
}

// SAFETY: chatparse.h: a loaded cp_tables is read-only and may be shared by any number of threads.
unsafe impl Send for Tables {}
unsafe impl Sync for Tables {}

impl Tables {
    /// Load and validate the bytes of a `.cpt` file (they may be dropped afterwards).
    pub fn load(bytes: &[u8]) -> Result<Self, Error> {
        let mut err = ffi::cp_error::zeroed();
        // SAFETY: the library reads exactly `bytes.len()` bytes at `bytes.as_ptr()`.
        let raw = unsafe { ffi::cp_tables_load(bytes.as_ptr(), bytes.len(), &mut err) };
        NonNull::new(raw)
            .map(|raw| Tables { raw })
            .ok_or_else(|| Error::from_raw(&err))
    }
}

impl Drop for Tables {
    fn drop(&mut self) {
        // SAFETY: from cp_tables_load, freed once; no parser outlives it (Parser borrows Tables).
        unsafe { ffi::cp_tables_free(self.raw.as_ptr()) }
    }
}

/// The event dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// transformers' events (the default).
    Transformers,
    /// vLLM's serving dialect.
    Vllm,
}

/// The prompt of a parser fed token ids: text, or token ids.
#[derive(Debug, Clone, Copy)]
pub enum Prompt<'a> {
    Text(&'a str),
    Ids(&'a [i64]),
}

/// One streaming parse of a generation (Python's ResponseParser, or its TokenParser when made by `new_ids`),
/// over tables it borrows.
pub struct Parser<'t> {
    raw: NonNull<ffi::cp_parser>,
    _tables: PhantomData<&'t Tables>,
}

// SAFETY: a parser belongs to one thread at a time (it is not Sync), and its tables are Sync.
unsafe impl Send for Parser<'_> {}

impl<'t> Parser<'t> {
    /// A parser for the output that follows `prompt` ("" opts out of the start anchor); `tools_json` is the
    /// request's tools as JSON text (a list), if any.
    pub fn new(tables: &'t Tables, prompt: &str, tools_json: Option<&str>, dialect: Dialect) -> Result<Self, Error> {
        let opts = Self::options(tools_json, dialect);
        let mut err = ffi::cp_error::zeroed();
        // SAFETY: the pointers are valid for the lengths given, for the duration of the call.
        let raw = unsafe {
            ffi::cp_parser_new(
                tables.raw.as_ptr(),
                prompt.as_ptr().cast(),
                prompt.len(),
                &opts,
                &mut err,
            )
        };
        NonNull::new(raw)
            .map(|raw| Parser {
                raw,
                _tables: PhantomData,
            })
            .ok_or_else(|| Error::from_raw(&err))
    }

    /// A parser fed token ids (`feed_ids`), over tables with a token section; the prompt is text or ids.
    pub fn new_ids(
        tables: &'t Tables,
        prompt: Prompt<'_>,
        tools_json: Option<&str>,
        dialect: Dialect,
    ) -> Result<Self, Error> {
        let opts = Self::options(tools_json, dialect);
        let (text, text_len, ids, n_ids) = match prompt {
            Prompt::Text(t) => (t.as_ptr().cast(), t.len(), ptr::null(), 0),
            // (an empty slice's pointer is not NULL: an empty prompt, not a missing one)
            Prompt::Ids(ids) => (ptr::null(), 0, ids.as_ptr(), ids.len()),
        };
        let mut err = ffi::cp_error::zeroed();
        // SAFETY: the pointers are valid for the lengths given (or NULL), for the duration of the call.
        let raw = unsafe { ffi::cp_parser_new_ids(tables.raw.as_ptr(), text, text_len, ids, n_ids, &opts, &mut err) };
        NonNull::new(raw)
            .map(|raw| Parser {
                raw,
                _tables: PhantomData,
            })
            .ok_or_else(|| Error::from_raw(&err))
    }

    fn options(tools_json: Option<&str>, dialect: Dialect) -> ffi::cp_parser_options {
        ffi::cp_parser_options {
            dialect: match dialect {
                Dialect::Transformers => ffi::CP_DIALECT_TRANSFORMERS_EVENTS,
                Dialect::Vllm => ffi::CP_DIALECT_VLLM_EVENTS,
            },
            tools_json: tools_json.map_or(ptr::null(), |t| t.as_ptr().cast()),
            tools_json_len: tools_json.map_or(0, str::len),
        }
    }

    /// The events of the prompt (a JSON list).
    pub fn initial_events(&mut self) -> String {
        let mut len = 0usize;
        // SAFETY: borrowed text owned by the parser, copied before the next call.
        unsafe {
            let text = ffi::cp_parser_initial_events(self.raw.as_ptr(), &mut len);
            let bytes = std::slice::from_raw_parts(text as *const u8, len);
            String::from_utf8_lossy(bytes).into_owned()
        }
    }

    /// Feed bytes of UTF-8 output (a character may be split across feeds: its bytes wait for the next);
    /// returns this feed's events (a JSON list).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<String, Error> {
        let mut err = ffi::cp_error::zeroed();
        let mut len = 0usize;
        // SAFETY: `bytes` is valid for its length; the result is taken (copied and freed) at once.
        unsafe {
            let events = ffi::cp_parser_feed(
                self.raw.as_ptr(),
                bytes.as_ptr().cast(),
                bytes.len(),
                &mut len,
                &mut err,
            );
            take(events, len, &err)
        }
    }

    /// Feed token ids (a parser from `new_ids`): the events of the text they complete (a JSON list).
    pub fn feed_ids(&mut self, ids: &[i64]) -> Result<String, Error> {
        let mut err = ffi::cp_error::zeroed();
        let mut len = 0usize;
        // SAFETY: `ids` is valid for its length; the result is taken (copied and freed) at once.
        unsafe {
            let events = ffi::cp_parser_feed_ids(self.raw.as_ptr(), ids.as_ptr(), ids.len(), &mut len, &mut err);
            take(events, len, &err)
        }
    }

    /// The end of the stream: (final events as a JSON list, the message as a JSON object).
    pub fn finalize(&mut self) -> Result<(String, String), Error> {
        let mut err = ffi::cp_error::zeroed();
        let mut message: *mut c_char = ptr::null_mut();
        let (mut message_len, mut len) = (0usize, 0usize);
        // SAFETY: both results are taken (copied and freed) before returning.
        unsafe {
            let events = ffi::cp_parser_finalize(self.raw.as_ptr(), &mut message, &mut message_len, &mut len, &mut err);
            if events.is_null() {
                ffi::cp_free(message.cast()); // NULL unless the library says otherwise: cp_free(NULL) is allowed
                return Err(Error::from_raw(&err));
            }
            let events = take(events, len, &err)?;
            let message = take(message, message_len, &err)?;
            Ok((events, message))
        }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: from cp_parser_new, freed once, before its tables (the borrow ensures it).
        unsafe { ffi::cp_parser_free(self.raw.as_ptr()) }
    }
}
