import { render } from 'preact';
import { App } from './app.tsx';
import './styles.css';
import './sites.css';

render(<App />, document.getElementById('root')!);
