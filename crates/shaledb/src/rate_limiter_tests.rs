//! The limiter's arithmetic on an injected clock: no test sleeps to measure a speed.

use super::*;
use std::sync::atomic::{AtomicU64, Ordering};

const MB: u64 = 1_000_000;
const PERIOD: u64 = 100_000;

fn bucket(rate: u64, fairness: u32, auto: bool) -> Bucket {
    Bucket::new(rate, PERIOD, fairness, auto, 0)
}

/// Takes `bytes` at `now` and polls until granted, advancing the time to each refill. Returns the time it
/// was granted.
fn take(b: &mut Bucket, mut now: u64, bytes: u64, pri: IoPriority) -> u64 {
    let Some(t) = b.request(now, bytes, pri) else { return now };
    loop {
        match b.poll(now, t) {
            Poll::Granted => return now,
            Poll::WaitUntil(at) => {
                assert!(at > now, "waits for a time already passed");
                now = at;
            }
        }
    }
}

#[test]
fn single_burst_is_rate_times_refill_period() {
    assert_eq!(bucket(MB, 10, false).burst(), 100_000);
    assert_eq!(Bucket::new(10 * MB, 1_000, 10, false, 0).burst(), 10_000);
    // Never 0, however small the rate.
    assert_eq!(bucket(1, 10, false).burst(), 1);
    // No overflow at the largest values.
    assert_eq!(Bucket::new(u64::MAX, MAX_REFILL_PERIOD_US, 10, false, 0).burst(), u64::MAX);
}

#[test]
fn requests_are_granted_from_the_bucket_and_wait_for_the_refill_when_it_is_empty() {
    let mut b = bucket(MB, 10, false);
    // The bucket starts empty with a refill due now.
    let t = b.request(0, 60_000, IoPriority::Low).unwrap();
    assert_eq!(b.poll(0, t), Poll::Granted);
    // 40 000 left: taken at once.
    assert_eq!(b.request(10, 40_000, IoPriority::Low), None);
    // Empty: the next byte waits for the refill at 100 ms, and is granted then.
    let t = b.request(20, 1, IoPriority::Low).unwrap();
    assert_eq!(b.poll(20, t), Poll::WaitUntil(PERIOD));
    assert_eq!(b.poll(PERIOD - 1, t), Poll::WaitUntil(PERIOD));
    assert_eq!(b.poll(PERIOD, t), Poll::Granted);
    assert_eq!(b.total_bytes, [100_001, 0]);
    assert_eq!(b.total_requests, [3, 0]);
}

#[test]
fn a_greedy_writer_gets_the_rate_and_no_more() {
    let mut b = bucket(MB, 10, false);
    let mut now = 0;
    let mut bytes = 0;
    // Ten seconds of requests of 10 000 bytes, as fast as the bucket allows.
    while now < 10 * 1_000_000 {
        now = take(&mut b, now, 10_000, IoPriority::Low);
        bytes += 10_000;
    }
    // Granted at refills 0, 100 ms, ..., 10 s: 101 bursts at most.
    assert!((10 * MB..=10 * MB + 100_000).contains(&bytes), "{bytes} bytes in 10 s at 1 MB/s");
}

#[test]
fn unused_bytes_carry_over_only_up_to_one_burst() {
    let mut b = bucket(MB, 10, false);
    let t = b.request(0, 1, IoPriority::Low).unwrap();
    assert_eq!(b.poll(0, t), Poll::Granted);
    // Idle for a second, then a large appetite: what was saved is at most one burst.
    let mut now = 1_000_000;
    let mut at_once = 0;
    while b.request(now, 10_000, IoPriority::Low).is_none() {
        at_once += 10_000;
        now += 1;
    }
    assert!(at_once < 100_000, "{at_once} bytes granted without waiting after an idle second");
}

#[test]
fn flushes_go_first_and_compactions_still_get_their_share() {
    for (fairness, low_first) in [(10u32, 60..=140), (100, 3..=20)] {
        let mut b = bucket(MB, fairness, false);
        let mut now = 0;
        let mut compaction_first = 0;
        for _ in 0..1000 {
            // A compaction then a flush ask for a whole burst each while the bucket is empty.
            let burst = b.burst();
            let low = b.request(now, burst, IoPriority::Low);
            let high = b.request(now, burst, IoPriority::High);
            let (Some(low), Some(high)) = (low, high) else { panic!("granted from an empty bucket") };
            now = b.next_refill_us.max(now);
            let loser = match (b.poll(now, low), b.poll(now, high)) {
                (Poll::Granted, Poll::WaitUntil(_)) => {
                    compaction_first += 1;
                    high
                }
                (Poll::WaitUntil(_), Poll::Granted) => low,
                other => panic!("exactly one burst was available, got {other:?}"),
            };
            // The other one goes through at the next refill.
            now = b.next_refill_us;
            assert_eq!(b.poll(now, loser), Poll::Granted);
        }
        // With fairness f the low queue goes first about once in f refills: never starved, rarely first.
        assert!(
            low_first.contains(&compaction_first),
            "fairness {fairness}: compaction first {compaction_first} times in 1000"
        );
    }
}

#[test]
fn a_request_larger_than_the_lowered_burst_is_granted_in_parts() {
    let mut b = bucket(MB, 10, false);
    let t = b.request(0, 100_000, IoPriority::Low).unwrap();
    b.set_rate(MB / 2);
    assert_eq!(b.burst(), 50_000);
    assert_eq!(b.poll(0, t), Poll::WaitUntil(PERIOD));
    assert_eq!(b.total_bytes[0], 50_000);
    assert_eq!(b.poll(PERIOD, t), Poll::Granted);
    assert_eq!(b.total_bytes[0], 100_000);
}

/// Tunes as 100 refill periods after the last tuning, `drained` of which had a request waiting for a refill.
fn tune_with(b: &mut Bucket, drained: u64) -> u64 {
    b.drains = drained;
    let now = b.tuned_at_us + REFILLS_PER_TUNE * PERIOD;
    b.tune(now);
    assert_eq!((b.drains, b.tuned_at_us), (0, now));
    b.rate
}

#[test]
fn auto_tuning_follows_how_often_the_bucket_ran_dry() {
    let max = 20 * MB;
    let mut b = bucket(max, 10, true);
    // Starts at half the limit.
    assert_eq!(b.rate, max / 2);
    // Never drained: down to the floor, limit / 20.
    assert_eq!(tune_with(&mut b, 0), max / 20);
    assert_eq!(b.burst(), max / 20 / 10);
    // Drained in over 90% of the periods: up 5% per tuning, never past the limit.
    assert_eq!(tune_with(&mut b, 91), max / 20 * 105 / 100);
    for _ in 0..80 {
        tune_with(&mut b, 100);
    }
    assert_eq!(b.rate, max);
    // Under 50%: down 5%, never under the floor.
    assert_eq!(tune_with(&mut b, 49), max * 100 / 105);
    // Between the watermarks: unchanged.
    assert_eq!(tune_with(&mut b, 50), max * 100 / 105);
    assert_eq!(tune_with(&mut b, 90), max * 100 / 105);
    for _ in 0..100 {
        tune_with(&mut b, 1);
    }
    assert_eq!(b.rate, max / 20);
}

/// Drains are counted once per refill period in which a request had to wait, and a request 100 periods
/// after the last tuning tunes before it is served.
#[test]
fn drains_are_counted_per_period_and_requests_trigger_the_tuning() {
    let mut b = bucket(20 * MB, 10, true);
    let burst = b.burst();
    // Empty the bucket, then two requests waiting for the same refill: one drain.
    take(&mut b, 0, burst, IoPriority::Low);
    let t1 = b.request(1, 1, IoPriority::Low).unwrap();
    let t2 = b.request(2, 1, IoPriority::High).unwrap();
    assert_eq!(b.poll(1, t1), Poll::WaitUntil(PERIOD));
    assert_eq!(b.poll(2, t2), Poll::WaitUntil(PERIOD));
    assert_eq!(b.poll(2, t1), Poll::WaitUntil(PERIOD));
    assert_eq!(b.drains, 1);
    assert_eq!((b.poll(PERIOD, t1), b.poll(PERIOD, t2)), (Poll::Granted, Poll::Granted));
    // Every period drained since: the next request after 100 periods raises the rate first.
    b.drains = REFILLS_PER_TUNE;
    let before = b.rate;
    b.request(REFILLS_PER_TUNE * PERIOD, 1, IoPriority::Low);
    assert_eq!(b.rate, before * 105 / 100);
    assert_eq!(b.tuned_at_us, REFILLS_PER_TUNE * PERIOD);
}

#[test]
fn bad_parameters_are_invalid_arguments() {
    for (rate, period, fairness) in
        [(0, PERIOD, 10), (MB, 0, 10), (MB, MAX_REFILL_PERIOD_US + 1, 10), (MB, PERIOD, 0), (MB, PERIOD, 101)]
    {
        let e = RateLimiter::new(rate, period, fairness, false).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("rate limiter"), "{e}");
    }
    let l = RateLimiter::new(MB, PERIOD, 10, false).unwrap();
    assert!(l.set_bytes_per_second(0).is_err());
    l.set_bytes_per_second(2 * MB).unwrap();
    assert_eq!((l.bytes_per_second(), l.single_burst_bytes()), (2 * MB, 200_000));
}

struct ManualClock(Arc<AtomicU64>);

impl MicrosClock for ManualClock {
    fn now_micros(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// The blocking `request`: a writer asking for three bursts is held until the (injected) clock reaches the
/// second refill after the first, and is then let through.
#[test]
fn request_blocks_until_the_clock_reaches_the_refills() {
    let time = Arc::new(AtomicU64::new(0));
    let l = Arc::new(RateLimiter::with_clock(MB, PERIOD, 10, false, Box::new(ManualClock(time.clone()))).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = {
        let l = l.clone();
        std::thread::spawn(move || {
            l.request(300_000, IoPriority::High);
            tx.send(()).unwrap();
        })
    };
    // The refill at 0 grants the first burst; the clock stands still, so the rest waits.
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "granted 3 bursts at time 0");
    assert_eq!(l.total_bytes_through(Some(IoPriority::High)), 100_000);
    time.store(PERIOD, Ordering::SeqCst);
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err(), "granted 3 bursts by the second refill");
    time.store(2 * PERIOD, Ordering::SeqCst);
    rx.recv_timeout(Duration::from_secs(10)).expect("not granted after the third refill");
    writer.join().unwrap();
    assert_eq!(l.total_bytes_through(None), 300_000);
    assert_eq!(l.total_bytes_through(Some(IoPriority::Low)), 0);
    assert_eq!(l.total_requests(Some(IoPriority::High)), 3);
}
