# make check runs exactly what CI runs: .ci/run is the one list of steps.

.PHONY: check lint test screenshots

# check: the checks, then every test with its outside dependencies.
check:
	bash .ci/run

# lint: build, gofmt, go vet, staticcheck (pinned), go mod tidy -diff.
lint:
	bash .ci/run lint

# test: the tests alone, as CI runs them.
test:
	bash .ci/run test

# screenshots: every decision page and the inbox at 360x800 and 1280x800,
# and the edit, menu, wrong-address, sign-in, consent, connections and
# upload pages on a phone, as Chromium renders them in the browser tests, written
# to screenshots/ (not committed): NAME.png is the first screen,
# NAME-full.png the page.
screenshots:
	mkdir -p screenshots
	COUNTERSIGN_SCREENSHOT_DIR=$(CURDIR)/screenshots go test ./internal/e2e -run 'TestBrowser(DecisionPages|Inbox|HeaderOneRow|WrongHost|ConsentFirstScreen|Files|EditThenApprove)$$' -count=1
	@echo "screenshots in $(CURDIR)/screenshots"
