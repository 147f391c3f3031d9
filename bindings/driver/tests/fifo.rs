//! Waiters of one client for one name are served in the order `acquire`
//! was called: the place in the local line is taken in the call, before
//! anything is spawned or awaited, whatever order the tasks then run in.

mod common;

use std::time::Duration;

use common::*;
use fencelock::{Client, LockOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_waiters_are_served_in_call_order() {
    let (url, _server) = redis_url();
    let client = Client::connect(url.as_str()).await.unwrap();
    let name = unique("fifo");
    let opts = LockOptions::new(Duration::from_secs(30));
    let holder = client.acquire(&name, &opts).await.unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut waiters = Vec::new();
    for i in 0..1000usize {
        let acquiring = client.acquire(&name, &opts); // in line from here
        let tx = tx.clone();
        waiters.push(tokio::spawn(async move {
            let lease = acquiring.await.unwrap();
            tx.send((i, lease.fence())).unwrap();
            lease.release().await.unwrap();
        }));
    }
    drop(tx);
    holder.release().await.unwrap();
    let mut served = Vec::new();
    while let Some(entry) = rx.recv().await {
        served.push(entry);
    }
    for waiter in waiters {
        waiter.await.unwrap();
    }
    let inversions = served.windows(2).filter(|w| w[1].0 < w[0].0).count();
    assert_eq!(inversions, 0, "served out of call order");
    assert_eq!(served.len(), 1000);
    assert!(
        served.windows(2).all(|w| w[1].1 > w[0].1),
        "fences increase"
    );
}
