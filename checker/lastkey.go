package checker

// lastKey remembers the state of the key looked up last: a run has a handful of keys and most
// consecutive events name the same one, found with a string comparison (the decoder shares one
// copy of each key, so mostly a pointer comparison) instead of a map's hash and probe.
type lastKey[V any] struct {
	key string
	v   *V
}

// get is key's state: the remembered one, else m's, else a new one from fresh added to m; the
// state returned is remembered.
func (l *lastKey[V]) get(m map[string]*V, key string, fresh func() *V) *V {
	if l.v != nil && l.key == key {
		return l.v
	}
	v := m[key]
	if v == nil {
		v = fresh()
		m[key] = v
	}
	l.key, l.v = key, v
	return v
}
