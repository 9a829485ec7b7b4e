//! stub

