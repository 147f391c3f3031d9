# Entry points; the logic lives in ci/*.sh (see README, "Testing").
.PHONY: test setup test-rust wasm lint fmt redis-start redis-stop

test:           ## everything: setup, redis-servers, all suites, stop
	bash ci/test.sh

setup:          ## install missing system packages (apt)
	bash ci/setup.sh

test-rust:      ## cargo test (core + driver); private redis-servers unless env set
	bash ci/test-rust.sh

wasm:           ## core -> wasm32 with Debian's toolchain + dependency check
	bash ci/test-wasm.sh

lint:           ## cargo fmt --check + clippy -D warnings (core + driver)
	bash ci/lint.sh

fmt:            ## format core + driver in place
	cargo fmt -p fencelock-core -p fencelock

redis-start:    ## start single + 5 redis-servers; env in .build/redis/env
	bash ci/redis.sh start

redis-stop:
	bash ci/redis.sh stop
