# make check runs exactly what CI runs: .ci/run is the one list of steps.

.PHONY: check lint test

# check: the checks, then every test with its outside dependencies.
check:
	bash .ci/run

# lint: build, gofmt, go vet, staticcheck (pinned), go mod tidy -diff.
lint:
	bash .ci/run lint

# test: the tests alone, as CI runs them.
test:
	bash .ci/run test
