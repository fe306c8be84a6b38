//! The C API of libchatparse (native/include/chatparse.h), declared by hand: no bindgen, no crates.
//! Keep in step with the header (the layout of cp_error and cp_parser_options, and each signature).

#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_int};

/// CP_ERROR_MESSAGE_SIZE in chatparse.h.
pub const CP_ERROR_MESSAGE_SIZE: usize = 2048;

/// `cp_error`: zero-initialized before a call, filled by a call that fails.
#[repr(C)]
pub struct cp_error {
    pub failed: c_int,
    pub truncated: c_int,
    pub exception: [c_char; 32],
    pub message: [c_char; CP_ERROR_MESSAGE_SIZE],
}

impl cp_error {
    pub fn zeroed() -> Self {
        cp_error {
            failed: 0,
            truncated: 0,
            exception: [0; 32],
            message: [0; CP_ERROR_MESSAGE_SIZE],
        }
    }
}

/// Opaque `cp_tables` and `cp_parser`.
#[repr(C)]
pub struct cp_tables {
    _private: [u8; 0],
}
#[repr(C)]
pub struct cp_parser {
    _private: [u8; 0],
}

/// `cp_dialect` (a C enum: int-sized).
pub type cp_dialect = c_int;
pub const CP_DIALECT_TRANSFORMERS_EVENTS: cp_dialect = 0;
pub const CP_DIALECT_VLLM_EVENTS: cp_dialect = 1;

#[repr(C)]
pub struct cp_parser_options {
    pub dialect: cp_dialect,
    pub tools_json: *const c_char,
    pub tools_json_len: usize,
}

extern "C" {
    #[allow(dead_code)] // declared with the rest of the API; the example does not print it
    pub fn cp_version() -> *const c_char;
    pub fn cp_tables_load(bytes: *const u8, n: usize, err: *mut cp_error) -> *mut cp_tables;
    pub fn cp_tables_free(tables: *mut cp_tables);
    pub fn cp_parser_new(
        tables: *const cp_tables,
        prompt: *const c_char,
        prompt_len: usize,
        opts: *const cp_parser_options,
        err: *mut cp_error,
    ) -> *mut cp_parser;
    pub fn cp_parser_initial_events(p: *mut cp_parser, len: *mut usize) -> *const c_char;
    pub fn cp_parser_feed(
        p: *mut cp_parser,
        text: *const c_char,
        len: usize,
        out_len: *mut usize,
        err: *mut cp_error,
    ) -> *mut c_char;
    pub fn cp_parser_finalize(
        p: *mut cp_parser,
        message: *mut *mut c_char,
        message_len: *mut usize,
        out_len: *mut usize,
        err: *mut cp_error,
    ) -> *mut c_char;
    pub fn cp_parser_new_ids(
        tables: *const cp_tables,
        prompt: *const c_char,
        prompt_len: usize,
        prompt_ids: *const i64,
        n_prompt_ids: usize,
        opts: *const cp_parser_options,
        err: *mut cp_error,
    ) -> *mut cp_parser;
    pub fn cp_parser_feed_ids(
        p: *mut cp_parser,
        ids: *const i64,
        n: usize,
        out_len: *mut usize,
        err: *mut cp_error,
    ) -> *mut c_char;
    pub fn cp_parser_free(p: *mut cp_parser);
    pub fn cp_free(p: *mut std::ffi::c_void);
}
