package azuretest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/termsig/termsig/azure/azuretest"
)

// A test of your own client: schedule a preemption in the fake and read
// the document as Azure serves it.
func ExampleServer() {
	srv := azuretest.NewServer()
	defer srv.Close()
	srv.SetEvents(azuretest.Event{
		EventID:   "602d9444-d2cd-49c7-8624-8643e7171297",
		EventType: "Preempt",
		NotBefore: time.Date(2026, 11, 30, 10, 2, 0, 0, time.UTC),
	})

	req, _ := http.NewRequest(http.MethodGet, srv.URL+azuretest.PathScheduledEvents+"?api-version=2020-07-01", nil)
	req.Header.Set("Metadata", "true")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer res.Body.Close()
	var doc struct {
		DocumentIncarnation int
		Events              []struct {
			EventID     string `json:"EventId"`
			EventType   string
			Resources   []string
			EventStatus string
			NotBefore   string
		}
	}
	if err := json.NewDecoder(res.Body).Decode(&doc); err != nil {
		fmt.Println(err)
		return
	}
	e := doc.Events[0]
	fmt.Println(doc.DocumentIncarnation, e.EventType, e.EventStatus, e.Resources)
	fmt.Println(e.NotBefore)
	// Output:
	// 2 Preempt Scheduled [test-vm]
	// Mon, 30 Nov 2026 10:02:00 GMT
}

// A test that a client acknowledges an event: the fake records the
// acknowledgement and starts the event, as Azure does.
func ExampleServer_StartRequests() {
	srv := azuretest.NewServer()
	defer srv.Close()
	srv.SetEvents(azuretest.Event{EventID: "e1", EventType: "Reboot", NotBefore: time.Now().Add(15 * time.Minute)})

	body := strings.NewReader(`{"StartRequests":[{"EventId":"e1"}]}`)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+azuretest.PathScheduledEvents+"?api-version=2020-07-01", body)
	req.Header.Set("Metadata", "true")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	res.Body.Close()

	e := srv.Events()[0]
	fmt.Println(res.StatusCode, srv.StartRequests())
	fmt.Println(e.EventStatus, e.NotBefore.IsZero(), srv.Incarnation())
	// Output:
	// 200 [e1]
	// Started true 3
}
