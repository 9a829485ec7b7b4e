//! One integration binary: the quick smoke run of the runner against the debug `dsh`, and its
//! argument errors.

mod smoke;
