//! Spike: the sites' byte cache on its hot path, the CLOCK cache behind a
//! read lock (`vole_sites::cache::ClockCache`, what a site hit reads today)
//! against `moka::sync::Cache` (the crate the web UI's caches use), both
//! weighed in bytes, looked up by (blob id, coding) from two threads as the
//! tree-serving bench's requests do. See README.md.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::RwLock;
use vole_sites::cache::{ClockCache, Variant};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type Key = ([u8; 20], Variant);

/// The tree-serving bench's site: 300 files, pages 4-20 KiB, a few images
/// up to 400 KiB (sizes only matter for the weights).
fn site() -> Vec<(Key, Bytes)> {
    (0..300u32)
        .map(|i| {
            let mut id = [0u8; 20];
            id[..4].copy_from_slice(&i.to_be_bytes());
            id[19] = (i * 37 % 251) as u8;
            let size = if i % 30 == 0 {
                100 << 10 | (i as usize * 997 % (300 << 10))
            } else {
                4096 + (i as usize * 131 % 16384)
            };
            let variant = if i % 3 == 0 {
                Variant::Gzip
            } else {
                Variant::Identity
            };
            ((id, variant), Bytes::from(vec![i as u8; size]))
        })
        .collect()
}

trait Lookup: Send + Sync {
    fn get(&self, key: &Key) -> Option<Bytes>;
}

struct Clock(RwLock<ClockCache<Key, Bytes>>);

impl Lookup for Clock {
    fn get(&self, key: &Key) -> Option<Bytes> {
        self.0.read().get(key).cloned()
    }
}

struct Moka(moka::sync::Cache<Key, Bytes>);

impl Lookup for Moka {
    fn get(&self, key: &Key) -> Option<Bytes> {
        self.0.get(key)
    }
}

const LIMIT: usize = 64 << 20;

fn clock(site: &[(Key, Bytes)]) -> Clock {
    let mut cache = ClockCache::new(LIMIT);
    for (key, bytes) in site {
        cache.insert(*key, bytes.clone(), bytes.len());
    }
    Clock(RwLock::new(cache))
}

fn moka(site: &[(Key, Bytes)]) -> Moka {
    let cache = moka::sync::Cache::builder()
        .max_capacity(LIMIT as u64)
        .weigher(|_: &Key, v: &Bytes| u32::try_from(v.len()).unwrap_or(u32::MAX))
        .build();
    for (key, bytes) in site {
        cache.insert(*key, bytes.clone());
    }
    cache.run_pending_tasks();
    Moka(cache)
}

/// Lookups a second over `threads` threads, each cycling through every
/// key (one in 64 a key that is not there, as a cold file's first look),
/// for `time`; checks every hit is the key's bytes.
fn rate(
    cache: Arc<dyn Lookup>,
    site: &Arc<Vec<(Key, Bytes)>>,
    threads: usize,
    time: Duration,
) -> f64 {
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (cache, site) = (cache.clone(), site.clone());
            std::thread::spawn(move || {
                let mut done = 0u64;
                let mut i = t * 97;
                let missing = ([0xffu8; 20], Variant::Identity);
                while started.elapsed() < time {
                    for _ in 0..1024 {
                        i = (i + 1) % site.len();
                        if i % 64 == 63 {
                            assert!(cache.get(&missing).is_none());
                        } else {
                            let (key, bytes) = &site[i];
                            let hit = cache.get(key).expect("every file is cached");
                            assert_eq!(hit.len(), bytes.len());
                        }
                        done += 1;
                    }
                }
                done
            })
        })
        .collect();
    let total: u64 = handles
        .into_iter()
        .map(|h| h.join().expect("a lookup thread panicked"))
        .sum();
    total as f64 / started.elapsed().as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.total_cmp(b));
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

fn main() {
    let mut rounds = 7usize;
    let mut seconds = 2u64;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => {
                rounds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--rounds N")
            }
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--seconds N")
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let site = Arc::new(site());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let time = Duration::from_secs(seconds);
    let clock: Arc<dyn Lookup> = Arc::new(clock(&site));
    let moka: Arc<dyn Lookup> = Arc::new(moka(&site));
    // Verification: both hold every file, byte for byte.
    for (key, bytes) in site.iter() {
        assert_eq!(clock.get(key).as_ref(), Some(bytes));
        assert_eq!(moka.get(key).as_ref(), Some(bytes));
    }
    println!("verified_keys={} threads={threads}", site.len());
    let (mut ratios, mut clocks, mut mokas) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        // Interleaved, alternating which goes first.
        let (c, m) = if round % 2 == 0 {
            let c = rate(clock.clone(), &site, threads, time);
            (c, rate(moka.clone(), &site, threads, time))
        } else {
            let m = rate(moka.clone(), &site, threads, time);
            (rate(clock.clone(), &site, threads, time), m)
        };
        println!(
            "round={round} clock_per_s={c:.0} moka_per_s={m:.0} moka/clock={:.3}",
            m / c
        );
        ratios.push(m / c);
        clocks.push(c);
        mokas.push(m);
    }
    let (c, m) = (median(clocks), median(mokas));
    println!(
        "median clock_ns_per_lookup={:.1} moka_ns_per_lookup={:.1} moka/clock throughput={:.3}",
        1e9 * threads as f64 / c,
        1e9 * threads as f64 / m,
        median(ratios)
    );
}
