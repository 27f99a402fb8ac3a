package tencent

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/termsig/termsig/internal/spotpoll"
)

// chinaStandardTime is the zone of the termination time, which its text
// does not carry: UTC+8, as Tencent documents it.
var chinaStandardTime = time.FixedZone("UTC+8", 8*60*60)

// timeFormat is how the metadata service writes a termination time, such
// as "2018-08-18 12:05:33": China Standard Time (UTC+8), to the second,
// with no zone in the text.
const timeFormat = "2006-01-02 15:04:05"

// parseTerminationTime reads spot/termination-time: a time in timeFormat,
// read in UTC+8 (a source that read it as UTC would be eight hours late),
// or an RFC 3339 time, whose zone is its own, should the service write one
// someday. Surrounding white space is allowed; anything else is an error:
// such bytes never make a notice.
func parseTerminationTime(body []byte) (time.Time, error) {
	s := bytes.TrimSpace(body)
	if len(s) == 0 {
		return time.Time{}, errors.New("empty answer")
	}
	if t, err := time.ParseInLocation(timeFormat, string(s), chinaStandardTime); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, string(s)); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("not a time such as 2018-08-18 12:05:33: %s", spotpoll.Describe(s))
}
