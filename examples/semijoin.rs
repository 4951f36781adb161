//! The survey's semi-join example (Broder & Mitzenmacher, "Network
//! Applications of Bloom Filters", §3.2): find the employees who live in
//! cities where the cost of living is above $50,000, when one host holds the
//! cities and another the employees.
//!
//! Two processes talk over TCP on 127.0.0.1:
//! 1. the **cities host** (this process) builds a compressed filter of the
//!    qualifying cities and sends it, instead of the list of city names;
//! 2. the **employees host** (a child process: this example re-run with the
//!    argument `employees PORT`) keeps the employees whose city may match and
//!    sends those (employee, city) pairs back;
//! 3. the cities host removes the false positives and checks the result
//!    against the exact join.
//!
//! Run: `cargo run --release --example semijoin`

use filterstore::{build_message, decode_message, encode_message, MessageTarget, MESSAGE_OVERHEAD};
use filterstore::{probe, Refiner};
use filterstore::{BitFilter, BloomRead, HashSpec};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::error::Error;
use std::io::{BufReader, BufWriter, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

const CITIES: u32 = 100_000;
const EMPLOYEES: u32 = 200_000;
const THRESHOLD: u32 = 95_000;
const TARGET_FP: f64 = 0.01;
/// No frame on this connection may exceed 64 MiB: checked before allocating.
const MAX_FRAME: u64 = 64 << 20;

fn city_name(i: u32) -> String {
    format!("city-{i:06}")
}

/// The cities table: name and cost of living in dollars (seeded: both hosts
/// could regenerate it, but only the cities host does).
fn cities() -> Vec<(String, u32)> {
    let mut rng = StdRng::seed_from_u64(1);
    (0..CITIES)
        .map(|i| (city_name(i), rng.gen_range(20_000..100_000)))
        .collect()
}

/// The employees table: name and city.
fn employees() -> Vec<(String, String)> {
    let mut rng = StdRng::seed_from_u64(2);
    (0..EMPLOYEES)
        .map(|i| {
            (
                format!("employee-{i:07}"),
                city_name(rng.gen_range(0..CITIES)),
            )
        })
        .collect()
}

fn send(w: &mut impl Write, bytes: &[u8]) -> std::io::Result<()> {
    w.write_all(&(bytes.len() as u64).to_le_bytes())?;
    w.write_all(bytes)?;
    w.flush()
}

fn receive(r: &mut impl Read) -> Result<Vec<u8>, Box<dyn Error>> {
    let mut len = [0u8; 8];
    r.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len);
    if len > MAX_FRAME {
        return Err(format!("peer announced {len} bytes, more than {MAX_FRAME}").into());
    }
    let mut buf = vec![0u8; len as usize];
    r.read_exact(&mut buf)?;
    Ok(buf)
}

/// The employees host: receive the filter, send back the matching pairs.
fn employees_host(port: u16) -> Result<(), Box<dyn Error>> {
    let stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    let bytes = receive(&mut reader)?;
    let msg = decode_message(&bytes)?;
    let filter = msg.filter()?;
    let table = employees();
    let candidates = probe(&filter, &table, |e| e.1.as_bytes());
    let mut out = String::new();
    for (name, city) in &candidates {
        out.push_str(name);
        out.push('\t');
        out.push_str(city);
        out.push('\n');
    }
    send(&mut writer, out.as_bytes())?;
    // Also a filter of the employees' cities, with the same parameters, so the
    // cities host can estimate the join before asking for any row.
    let own = BitFilter::new(*filter.params())?;
    for (_, city) in &table {
        own.insert(city.as_bytes());
    }
    let reply = encode_message(&own, EMPLOYEES as u64, 1, Default::default())?;
    send(&mut writer, &reply)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("employees") {
        let port = args
            .get(2)
            .ok_or("usage: semijoin employees PORT")?
            .parse()?;
        return employees_host(port);
    }

    let cities = cities();
    let expensive: Vec<&str> = cities
        .iter()
        .filter(|c| c.1 > THRESHOLD)
        .map(|c| c.0.as_str())
        .collect();
    let key_list_bytes: usize = expensive.iter().map(|c| c.len() + 1).sum();
    let hash = HashSpec::random();
    let (msg, _filter) = build_message(&expensive, MessageTarget::Fp(TARGET_FP), hash, 1)?;
    let decoded = decode_message(&msg)?;
    println!(
        "cities host: {} of {CITIES} cities cost more than ${THRESHOLD}",
        expensive.len()
    );
    println!(
        "  filter: m = {} bits, k = {}, codec {}, {} bytes (header {}), against {key_list_bytes} bytes for the list of names ({:.1}× smaller)",
        decoded.params().m(),
        decoded.params().k(),
        decoded.descriptor.codec.name(),
        msg.len(),
        MESSAGE_OVERHEAD,
        key_list_bytes as f64 / msg.len() as f64
    );

    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let mut child = Command::new(std::env::current_exe()?)
        .args(["employees", &port.to_string()])
        .stdin(Stdio::null())
        .spawn()?;
    let (stream, _) = listener.accept()?;
    stream.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    send(&mut writer, &msg)?;
    let rows = receive(&mut reader)?;
    let their_cities = receive(&mut reader)?;
    let status = child.wait()?;
    if !status.success() {
        return Err(format!("employees host failed: {status}").into());
    }

    let text = String::from_utf8(rows)?;
    let pairs: Vec<(&str, &str)> = text
        .lines()
        .map(|l| l.split_once('\t').ok_or("malformed row"))
        .collect::<Result<_, _>>()?;
    let refiner = Refiner::new(&expensive);
    let (joined, stats) = refiner.refine(pairs, |p| p.1.as_bytes());
    println!(
        "employees host sent back {} (employee, city) pairs, {} bytes",
        stats.received,
        text.len()
    );
    println!(
        "  {} false positives removed ({:.2}% of the {} employees in cheaper cities; target {}%)",
        stats.false_positives,
        stats.false_positives as f64 / (EMPLOYEES as u64 - stats.kept) as f64 * 100.0,
        EMPLOYEES as u64 - stats.kept,
        TARGET_FP * 100.0
    );

    // The exact join, computed with both tables in one place, for the check.
    let exact: Vec<(String, String)> = employees()
        .into_iter()
        .filter(|e| refiner.matches(e.1.as_bytes()))
        .collect();
    let same = exact.len() == joined.len()
        && exact
            .iter()
            .zip(&joined)
            .all(|(a, b)| a.0 == b.0 && a.1 == b.1);
    println!(
        "result: {} employees live in expensive cities; equal to the exact join: {same}",
        joined.len()
    );

    // Size estimates from filters alone (survey §2.4).
    let theirs = decode_message(&their_cities)?;
    let ours = decoded.filter()?;
    let their_filter = theirs.filter()?;
    let distinct: std::collections::HashSet<String> =
        employees().into_iter().map(|e| e.1).collect();
    let true_common = expensive.iter().filter(|c| distinct.contains(**c)).count();
    println!(
        "estimates from filters: {:.0} expensive cities (true {}), {:.0} cities where employees live (true {}), {:.0} in common (true {true_common})",
        ours.estimate_len(),
        expensive.len(),
        their_filter.estimate_len(),
        distinct.len(),
        ours.estimate_intersection_len(&their_filter)?
    );
    if !same {
        return Err("the semi-join result differs from the exact join".into());
    }
    Ok(())
}
