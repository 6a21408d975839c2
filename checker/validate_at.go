package checker

import "github.com/lockpick-dev/lockpick/history"

// at is event i of the history being validated.
func (v *validator) at(i int) *history.Event { return v.st.at(i) }
