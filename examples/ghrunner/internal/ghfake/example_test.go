package ghfake_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/google/go-github/v75/github"

	"github.com/termsig/termsig/examples/ghrunner/internal/ghfake"
)

// A test of your own code that talks to GitHub: point go-github at the
// fake, set up the state, and check what your code did to it.
func Example() {
	gh, err := ghfake.Start(ghfake.Config{Token: "ghp_example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer gh.Close()
	stale := gh.AddRunner("acme/app", ghfake.RunnerSpec{Name: "spot-1"})
	gh.AddLostJob("acme/app", stale, "spot-1")

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := github.NewClient(&http.Client{Transport: tr}).WithAuthToken("ghp_example")
	client.BaseURL, _ = client.BaseURL.Parse(gh.APIURL())

	// The code under test would do this.
	ctx := context.Background()
	runners, _, err := client.Actions.ListRunners(ctx, "acme", "app", &github.ListRunnersOptions{Name: github.Ptr("spot-1")})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range runners.Runners {
		fmt.Println(r.GetName(), r.GetStatus())
		_, err = client.Actions.RemoveRunner(ctx, "acme", "app", r.GetID())
		fmt.Println("removed:", err == nil)
	}

	_, still := gh.Runner(stale)
	fmt.Println("still registered:", still)
	for _, c := range gh.Calls() {
		fmt.Println(c.Method, c.Path, c.Status)
	}
	// Output:
	// spot-1 offline
	// removed: true
	// still registered: false
	// GET /repos/acme/app/actions/runners 200
	// DELETE /repos/acme/app/actions/runners/1 204
}
