# Entry points; the logic lives in the scripts (see README, "Testing").
.PHONY: test setup test-rust test-python test-node test-interop wasm lint fmt \
        demo safety bench redis-start redis-stop dist test-dist

test:           ## everything: setup, redis-servers, all suites, stop
	bash ci/test.sh

setup:          ## install missing system packages (apt)
	bash ci/setup.sh

# One suite alone (private redis-servers unless FENCELOCK_TEST_* are set).
test-rust:      ## cargo test (default members: core, driver, conformance)
	bash ci/test-rust.sh
test-python:
	bash ci/test-python.sh
test-node:
	bash ci/test-node.sh
test-interop:   ## vectors, interop agents, MONITOR sameness
	bash ci/test-interop.sh

test-dist:      ## make dist, then install the artifacts without cargo and run the quick starts
	bash ci/test-dist.sh

wasm:           ## core dependency check; build fencelock/wasm, test it under Node, Bun, Deno
	bash ci/test-wasm.sh

lint:           ## cargo fmt --check + clippy -D warnings (every crate)
	bash ci/lint.sh

fmt:            ## format every crate in place (what lint checks)
	cargo fmt --all
	cargo fmt --manifest-path bindings/wasm/Cargo.toml

dist:           ## wheel, sdist, npm tarballs, crates -> dist/ (docs/releasing.md)
	bash ci/dist.sh

demo:           ## Python + Node workers on shared locks (REDIS_URL optional)
	bash demo/run.sh

safety:         ## fuzz + every fault scenario, writes docs/safety.md (< 10 min)
	bash tests/safety/run.sh

bench:          ## vs peer libraries -> bench/results.md; QUICK=1 for a smoke run
	bash bench/run.sh

redis-start:    ## start single, 5 Redlock nodes, a cluster, Sentinels; env in .build/redis/env
	bash ci/redis.sh start

redis-stop:
	bash ci/redis.sh stop
