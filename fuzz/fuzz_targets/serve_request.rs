#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    dsh_fuzz_targets::serve_request(data);
});
