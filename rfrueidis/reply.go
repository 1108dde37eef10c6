package rfrueidis

import (
	"errors"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// fill leaves r's reply or error in cmd, as go-redis would have decoded it.
func fill(cmd *redis.Cmd, r rueidis.RedisResult) {
	if err := r.NonRedisError(); err != nil {
		cmd.SetErr(err)
		return
	}
	m, err := r.ToMessage()
	if err != nil && !isRedisErr(err) {
		cmd.SetErr(err)
		return
	}
	setReply(cmd, &m)
}

// setReply leaves the reply m in cmd: a nil reply as the error redis.Nil, a
// server's error as a redis.Error, any other value as goValue decodes it.
func setReply(cmd *redis.Cmd, m *rueidis.RedisMessage) {
	if err := m.Error(); err != nil {
		if rueidis.IsRedisNil(err) {
			cmd.SetErr(redis.Nil)
			return
		}
		cmd.SetErr(convertErr(err))
		return
	}
	v, err := goValue(m)
	cmd.SetVal(v)
	cmd.SetErr(err)
}

// goValue decodes m into the types go-redis gives a generic command:
// int64, string, float64, bool, []any and map[any]any; nil elements of an
// array stay nil, as go-redis keeps them.
func goValue(m *rueidis.RedisMessage) (any, error) {
	switch {
	case m.IsNil():
		return nil, nil
	case m.IsInt64():
		return m.AsInt64()
	case m.IsString():
		return m.ToString()
	case m.IsFloat64():
		return m.ToFloat64()
	case m.IsBool():
		return m.ToBool()
	case m.IsMap():
		mm, err := m.ToMap()
		if err != nil {
			return nil, err
		}
		out := make(map[any]any, len(mm))
		for k, e := range mm {
			v, err := goValue(&e)
			if err != nil {
				return nil, err
			}
			out[k] = v
		}
		return out, nil
	case m.IsArray():
		a, err := m.ToArray()
		if err != nil {
			return nil, err
		}
		out := make([]any, len(a))
		for i := range a {
			if err := a[i].Error(); err != nil && !rueidis.IsRedisNil(err) {
				out[i] = convertErr(err)
				continue
			}
			v, err := goValue(&a[i])
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return m.ToAny()
}

// redisError is a server's error reply as go-redis presents it (a
// redis.Error), so that the engine's checks of its prefix (NOSCRIPT,
// NOPERM, MOVED) hold whichever client carried the command.
type redisError string

func (e redisError) Error() string { return string(e) }

// RedisError marks e as a server's reply (redis.Error).
func (redisError) RedisError() {}

// convertErr turns a rueidis server error into a redis.Error; other errors
// pass unchanged.
func convertErr(err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok {
		return redisError(re.Error())
	}
	return err
}

func isRedisErr(err error) bool {
	var re *rueidis.RedisError
	return errors.As(err, &re)
}
