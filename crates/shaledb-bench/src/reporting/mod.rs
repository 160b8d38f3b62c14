//! What a benchmark reports: latency histograms ([`histogram`]), per-thread counters and the time series of a
//! run ([`recorder`]), db_bench's text and the JSON record ([`report`]), and the plots ([`plot`]).

pub mod histogram;
pub mod plot;
pub mod recorder;
pub mod report;
