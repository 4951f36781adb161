//! The `filterstore` command-line tool.
fn main() {
    println!("filterstore");
}
