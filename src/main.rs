//! The `distlock` binary: everything lives in the library; see `lib.rs`.

fn main() {
    distlock::main()
}
